"""Histogram and counter state of the client metrics, shippable as deltas between processes.

Workers drain their counts into a plain, msgpack-friendly structure every report; the master
merges each delta into its totals, so its histograms are the exact sum of every observation.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from loadwatch.metrics.definitions import HISTOGRAMS

LabelValues = tuple[str, ...]


class HistogramCounts:
    __slots__ = ("buckets", "counts", "total")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last slot is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        # bisect_left puts a value equal to a bound into that bucket, as `le` means.
        self.counts[bisect_left(self.buckets, value)] += 1
        self.total += value

    def add(self, counts: list[int], total: float) -> None:
        for i, n in enumerate(counts):
            self.counts[i] += n
        self.total += total

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

    def observe(self, name: str, labels: LabelValues, value: float) -> None:
        key = (name, labels)
        hist = self.histograms.get(key)
        if hist is None:
            hist = self.histograms[key] = HistogramCounts(HISTOGRAMS[name].buckets)
        hist.observe(value)

    def inc(self, name: str, labels: LabelValues, amount: float = 1.0) -> None:
        key = (name, labels)
        self.counters[key] = self.counters.get(key, 0.0) + amount

    def drain(self) -> dict:
        """Everything counted since the last drain, as plain lists; the counts restart at zero."""
        delta = {
            "h": [[name, list(labels), h.counts, h.total] for (name, labels), h in self.histograms.items()],
            "c": [[name, list(labels), v] for (name, labels), v in self.counters.items()],
        }
        self.histograms.clear()
        self.counters.clear()
        return delta

    def merge(self, delta: dict) -> None:
        for name, labels, counts, total in delta["h"]:
            key = (name, tuple(labels))
            hist = self.histograms.get(key)
            if hist is None:
                hist = self.histograms[key] = HistogramCounts(HISTOGRAMS[name].buckets)
            hist.add(counts, total)
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
