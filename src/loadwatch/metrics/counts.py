"""Histogram and counter state of the client metrics, shippable as deltas between processes.

Workers drain their counts into a plain, msgpack-friendly structure every report; the master
merges each delta into its totals, so its histograms are the exact sum of every observation.

A histogram defined with exemplars keeps, per bucket, the request id of the slowest request of the
bucket within EXEMPLAR_INTERVAL, then the next one to come. That bounds what a worker ships (one per
bucket per report) and keeps what Prometheus scrapes recent, so that a spike on a panel leads to a
request of that moment.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import NamedTuple

from loadwatch.metrics.definitions import HISTOGRAMS

LabelValues = tuple[str, ...]
EXEMPLAR_INTERVAL = 10.0  # seconds a bucket's exemplar stands unless a slower request comes


class Exemplar(NamedTuple):
    request_id: str
    value: float
    at: float  # Unix time of the observation


class HistogramCounts:
    __slots__ = ("buckets", "counts", "total", "exemplars")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last slot is +Inf
        self.total = 0.0
        self.exemplars: list[Exemplar | None] | None = None  # per bucket, once a request id is observed

    def observe(self, value: float, request_id: str = "", at: float = 0.0) -> None:
        # bisect_left puts a value equal to a bound into that bucket, as `le` means.
        i = bisect_left(self.buckets, value)
        self.counts[i] += 1
        self.total += value
        if request_id:
            self.offer(i, Exemplar(request_id, value, at))

    def observe_many(self, values: tuple[float, ...] | list[float]) -> None:
        """`observe` for each value, in order, without exemplars: a request's inter-token gaps, one
        per streamed chunk, counted with the state in locals."""
        buckets, counts, total = self.buckets, self.counts, self.total
        for value in values:
            counts[bisect_left(buckets, value)] += 1
            total += value
        self.total = total

    def offer(self, i: int, exemplar: Exemplar) -> None:
        if self.exemplars is None:
            self.exemplars = [None] * len(self.counts)
        held = self.exemplars[i]
        if held is None or exemplar.value > held.value or exemplar.at - held.at > EXEMPLAR_INTERVAL:
            self.exemplars[i] = exemplar

    def add(self, counts: list[int], total: float, exemplars: list | None = None) -> None:
        for i, n in enumerate(counts):
            self.counts[i] += n
        self.total += total
        for i, *exemplar in exemplars or ():
            self.offer(i, Exemplar(*exemplar))

    def shipped_exemplars(self) -> list[list]:
        return [[i, *e] for i, e in enumerate(self.exemplars or ()) if e is not None]

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, n in zip((*self.buckets, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out


class MetricCounts:
    """Histograms and counters keyed by metric name and label values."""

    def __init__(self) -> None:
        self.histograms: dict[tuple[str, LabelValues], HistogramCounts] = {}
        self.counters: dict[tuple[str, LabelValues], float] = {}

    def observe(self, name: str, labels: LabelValues, value: float, request_id: str = "", at: float = 0.0) -> None:
        key = (name, labels)
        hist = self.histograms.get(key)
        if hist is None:
            hist = self.histograms[key] = HistogramCounts(HISTOGRAMS[name].buckets)
        hist.observe(value, request_id if HISTOGRAMS[name].exemplars else "", at)

    def observe_many(self, name: str, labels: LabelValues, values: tuple[float, ...] | list[float]) -> None:
        key = (name, labels)
        hist = self.histograms.get(key)
        if hist is None:
            hist = self.histograms[key] = HistogramCounts(HISTOGRAMS[name].buckets)
        hist.observe_many(values)

    def inc(self, name: str, labels: LabelValues, amount: float = 1.0) -> None:
        key = (name, labels)
        self.counters[key] = self.counters.get(key, 0.0) + amount

    def drain(self) -> dict:
        """Everything counted since the last drain, as plain lists; the counts restart at zero."""
        delta = {
            "h": [[name, list(labels), h.counts, h.total, h.shipped_exemplars()]
                  for (name, labels), h in self.histograms.items()],
            "c": [[name, list(labels), v] for (name, labels), v in self.counters.items()],
        }
        self.histograms.clear()
        self.counters.clear()
        return delta

    def merge(self, delta: dict) -> None:
        for name, labels, counts, total, exemplars in delta["h"]:
            key = (name, tuple(labels))
            hist = self.histograms.get(key)
            if hist is None:
                hist = self.histograms[key] = HistogramCounts(HISTOGRAMS[name].buckets)
            hist.add(counts, total, exemplars)
        for name, labels, value in delta["c"]:
            self.inc(name, tuple(labels), value)

    def histograms_named(self, name: str) -> Iterator[tuple[LabelValues, HistogramCounts]]:
        for (metric, labels), hist in self.histograms.items():
            if metric == name:
                yield labels, hist

    def counters_named(self, name: str) -> Iterator[tuple[LabelValues, float]]:
        for (metric, labels), value in self.counters.items():
            if metric == name:
                yield labels, value
