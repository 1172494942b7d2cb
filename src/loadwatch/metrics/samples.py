"""What the end-of-run figures are made of, in memory that does not grow with the run.

One `Series` per (model, scenario, stage): a sketch per latency, counts and token sums, the
requests within the run's goodput limits, the window the requests spanned, and an open loop's
`Arrivals` (how well the schedule was kept). Workers ship
their series as deltas with each report and the master merges them exactly.
"""

from __future__ import annotations

import math
from collections import Counter

from loadwatch.metrics.results import LATENCY_METRICS
from loadwatch.metrics.sketch import Sketch
from loadwatch.metrics.timing import RequestMetrics

SeriesKey = tuple[str, ...]  # model, scenario, stage; or a fleet's replica
# TTFT split at the response headers: before them (request handling, template, tokenization) and after.
HEADERS, AFTER_HEADERS = "headers", "ttft_after_headers"
TTFA = "ttfa"  # time to the first answer token, after a reasoning model's thoughts
DISTRIBUTIONS = (*LATENCY_METRICS, HEADERS, AFTER_HEADERS, TTFA)
# Sums over successful requests, beside the token counts: what the server reused, reasoned and called.
TALLIES = ("cached_tokens", "cache_reported_prompt_tokens", "reasoning_tokens", "tool_calls", "images", "image_bytes")


class Arrivals:
    """An open loop's arrivals: how many went out and how many were dropped at the concurrency cap,
    how late each went out (a sketch of seconds), and the first and last of their due and actual
    times. Due times span the schedule as drawn, actual times what the load generator kept of it:
    their ratio is free of the draw's chance, which at a few hundred arrivals moves a measured
    rate by several percent either way."""

    def __init__(self, distribution: type = Sketch) -> None:
        self.sent = 0
        self.dropped = 0
        self.lag = distribution()
        self.due = [math.inf, -math.inf]
        self.at = [math.inf, -math.inf]

    @property
    def scheduled(self) -> int:
        return self.sent + self.dropped

    def add(self, due: float, at: float, sent: bool) -> None:
        if sent:
            self.sent += 1
            self.lag.add(max(0.0, at - due))
        else:
            self.dropped += 1
        self.due = [min(self.due[0], due), max(self.due[1], due)]
        self.at = [min(self.at[0], at), max(self.at[1], at)]

    def merge(self, other: Arrivals) -> None:
        self.sent += other.sent
        self.dropped += other.dropped
        self.lag.merge(other.lag)
        self.due = [min(self.due[0], other.due[0]), max(self.due[1], other.due[1])]
        self.at = [min(self.at[0], other.at[0]), max(self.at[1], other.at[1])]

    def to_wire(self) -> dict:
        return {"sent": self.sent, "dropped": self.dropped, "lag": self.lag.to_wire(), "due": self.due,
                "at": self.at}

    @classmethod
    def from_wire(cls, wire: dict) -> Arrivals:
        arrivals = cls()
        arrivals.sent, arrivals.dropped = wire["sent"], wire["dropped"]
        arrivals.due, arrivals.at = wire["due"], wire["at"]
        arrivals.lag = Sketch.from_wire(wire["lag"])
        return arrivals


class Series:
    def __init__(self, distribution: type = Sketch) -> None:
        # Sketches in a run; Exact for a per-request file read back.
        self.distribution = distribution
        self.latency = {name: distribution() for name in DISTRIBUTIONS}  # seconds
        self.completed = 0
        self.cancelled = 0  # the client hung up: in no latency but TTFT, where it got that far
        self.good = 0  # completed within every goodput limit
        self.failures: Counter[str] = Counter()
        # Refused by the server's admission control, by its reason: neither completed nor failed.
        self.rejections: Counter[str] = Counter()
        self.prompt_tokens = 0.0
        self.completion_tokens = 0.0
        self.tallies = dict.fromkeys(TALLIES, 0)
        self.first_start = math.inf
        self.last_end = -math.inf
        self.arrivals = Arrivals(distribution)

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    @property
    def rejected(self) -> int:
        return sum(self.rejections.values())

    def _span(self, started_at: float, elapsed: float) -> None:
        self.first_start = min(self.first_start, started_at)
        self.last_end = max(self.last_end, started_at + elapsed)

    def add_success(self, started_at: float, m: RequestMetrics, good: bool = True, images: int = 0,
                    image_bytes: int = 0) -> None:
        self._span(started_at, m.e2e)
        self.completed += 1
        self.good += good
        self.latency["e2el"].add(m.e2e)
        if m.tpot is not None:
            self.latency["tpot"].add(m.tpot)
        self.latency["itl"].extend(m.itl)
        if m.ttft is not None:  # an embeddings or rerank answer has no first token: its E2E is all
            self.latency["ttft"].add(m.ttft)
            if m.headers is not None:
                self.latency[HEADERS].add(m.headers)
                self.latency[AFTER_HEADERS].add(m.ttft - m.headers)
        if m.ttfa is not None:
            self.latency[TTFA].add(m.ttfa)
        self.prompt_tokens += m.prompt_tokens or 0
        self.completion_tokens += m.completion_tokens or 0
        if m.cached_tokens is not None:
            self.tallies["cached_tokens"] += m.cached_tokens
            self.tallies["cache_reported_prompt_tokens"] += m.prompt_tokens or 0
        self.tallies["reasoning_tokens"] += m.reasoning_tokens or 0
        self.tallies["tool_calls"] += m.tool_calls
        self.tallies["images"] += images
        self.tallies["image_bytes"] += image_bytes

    def add_cancelled(self, started_at: float, elapsed: float, ttft: float | None) -> None:
        self._span(started_at, elapsed)
        self.cancelled += 1
        if ttft is not None:
            self.latency["ttft"].add(ttft)

    def add_failure(self, started_at: float, elapsed: float, reason: str) -> None:
        self._span(started_at, elapsed)
        self.failures[reason] += 1

    def add_rejected(self, started_at: float, elapsed: float, reason: str) -> None:
        self._span(started_at, elapsed)
        self.rejections[reason] += 1

    def window(self) -> float:
        """From the first request's start to the last one's end."""
        return self.last_end - self.first_start if self.last_end > self.first_start else 0.0

    def merge(self, other: Series) -> None:
        if other.distribution is not self.distribution:
            raise TypeError("a series merges with one of its kind only")
        for name, sketch in other.latency.items():
            self.latency[name].merge(sketch)
        self.completed += other.completed
        self.cancelled += other.cancelled
        self.good += other.good
        self.failures.update(other.failures)
        self.rejections.update(other.rejections)
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        for name, value in other.tallies.items():
            self.tallies[name] += value
        self.first_start = min(self.first_start, other.first_start)
        self.last_end = max(self.last_end, other.last_end)
        self.arrivals.merge(other.arrivals)

    def to_wire(self) -> dict:
        return {"latency": {name: s.to_wire() for name, s in self.latency.items()}, "completed": self.completed,
                "cancelled": self.cancelled, "good": self.good, "failures": dict(self.failures),
                "rejections": dict(self.rejections),
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "tallies": self.tallies, "span": [self.first_start, self.last_end], "arrivals": self.arrivals.to_wire()}

    @classmethod
    def from_wire(cls, wire: dict) -> Series:
        series = cls()
        series.latency = {name: Sketch.from_wire(s) for name, s in wire["latency"].items()}
        series.completed, series.cancelled, series.good = wire["completed"], wire["cancelled"], wire["good"]
        series.failures = Counter(wire["failures"])
        series.rejections = Counter(wire["rejections"])
        series.prompt_tokens, series.completion_tokens = wire["prompt_tokens"], wire["completion_tokens"]
        series.tallies.update(wire["tallies"])
        series.first_start, series.last_end = wire["span"]
        series.arrivals = Arrivals.from_wire(wire["arrivals"])
        return series


class Samples:
    def __init__(self, distribution: type = Sketch) -> None:
        self.distribution = distribution
        self.by_key: dict[SeriesKey, Series] = {}

    def of(self, key: SeriesKey) -> Series:
        series = self.by_key.get(key)
        if series is None:
            series = self.by_key[key] = Series(self.distribution)
        return series

    def _merged(self, parts) -> Series:
        total = Series(self.distribution)
        for part in parts:
            total.merge(part)
        return total

    def total(self) -> Series:
        return self._merged(self.by_key.values())

    def by_scenario(self) -> dict[tuple[str, str], Series]:
        """(model, scenario) -> its series over every stage."""
        out: dict[tuple[str, str], Series] = {}
        for (model, scenario, _stage), series in self.by_key.items():
            out.setdefault((model, scenario), Series(self.distribution)).merge(series)
        return out

    def by_model(self) -> dict[str, Series]:
        """model (a traffic split's model or LoRA adapter) -> its series over every scenario and stage."""
        out: dict[str, Series] = {}
        for (model, _scenario, _stage), series in self.by_key.items():
            out.setdefault(model, Series(self.distribution)).merge(series)
        return out

    def of_stage(self, stage: str) -> Series:
        return self._merged(s for (_model, _scenario, name), s in self.by_key.items() if name == stage)

    def drain(self) -> list:
        wire = [[list(key), s.to_wire()] for key, s in self.by_key.items()]
        self.by_key.clear()
        return wire

    def merge(self, wire: list) -> None:
        for key, series in wire:
            self.of(tuple(key)).merge(Series.from_wire(series))

    def clear(self) -> None:
        self.by_key.clear()
