"""Per-request figures kept column by column, for exact percentiles like `vllm bench serve`.

Histograms answer Prometheus; the end-of-run summary and SLO verdicts need every value, so
workers also ship these columns (as packed doubles) and the master concatenates them.
"""

from __future__ import annotations

from array import array
from collections import Counter

import numpy as np

from loadwatch.metrics.timing import RequestMetrics

LabelValues = tuple[str, ...]
NAN = float("nan")
COLUMNS = ("start", "end", "ttft", "e2e", "tpot", "prompt_tokens", "completion_tokens", "itl", "itl_count",
           "fail_start", "fail_end")


class ScenarioSamples:
    """Columns of one (model, scenario); row i of the success columns is one request."""

    def __init__(self) -> None:
        self.start = array("d")
        self.end = array("d")
        self.ttft = array("d")
        self.e2e = array("d")
        self.tpot = array("d")
        self.prompt_tokens = array("d")
        self.completion_tokens = array("d")
        self.itl = array("d")
        self.itl_count = array("d")
        self.fail_start = array("d")
        self.fail_end = array("d")
        self.fail_reason: list[str] = []

    def column(self, name: str) -> array:
        """One of COLUMNS by name: for the wire format and per-stage cuts."""
        return getattr(self, name)

    def add_success(self, started_at: float, m: RequestMetrics) -> None:
        self.start.append(started_at)
        self.end.append(started_at + m.e2e)
        self.ttft.append(m.ttft)
        self.e2e.append(m.e2e)
        self.tpot.append(NAN if m.tpot is None else m.tpot)
        self.prompt_tokens.append(NAN if m.prompt_tokens is None else m.prompt_tokens)
        self.completion_tokens.append(NAN if m.completion_tokens is None else m.completion_tokens)
        self.itl.extend(m.itl)
        self.itl_count.append(len(m.itl))

    def add_failure(self, started_at: float, elapsed: float, reason: str) -> None:
        self.fail_start.append(started_at)
        self.fail_end.append(started_at + elapsed)
        self.fail_reason.append(reason)

    @property
    def failures(self) -> Counter[str]:
        return Counter(self.fail_reason)

    @property
    def completed(self) -> int:
        return len(self.ttft)

    @property
    def failed(self) -> int:
        return len(self.fail_start)

    def started_within(self, begin: float, end: float) -> ScenarioSamples:
        """The requests sent in [begin, end): a stage's share, whenever they finished."""
        out = ScenarioSamples()
        start = np.frombuffer(self.start, dtype=np.float64)
        keep = (start >= begin) & (start < end)
        for column in COLUMNS[:7]:
            out.column(column).frombytes(np.frombuffer(self.column(column), dtype=np.float64)[keep].tobytes())
        counts = np.frombuffer(self.itl_count, dtype=np.float64)
        out.itl.frombytes(np.frombuffer(self.itl, dtype=np.float64)[np.repeat(keep, counts.astype(int))].tobytes())
        out.itl_count.frombytes(counts[keep].tobytes())
        fail_start = np.frombuffer(self.fail_start, dtype=np.float64)
        fail_keep = (fail_start >= begin) & (fail_start < end)
        out.fail_start.frombytes(fail_start[fail_keep].tobytes())
        out.fail_end.frombytes(np.frombuffer(self.fail_end, dtype=np.float64)[fail_keep].tobytes())
        out.fail_reason = [r for r, k in zip(self.fail_reason, fail_keep, strict=True) if k]
        return out

    def to_wire(self) -> dict:
        wire: dict = {column: self.column(column).tobytes() for column in COLUMNS}
        wire["fail_reason"] = list(self.fail_reason)
        return wire

    def extend_from_wire(self, wire: dict) -> None:
        for column in COLUMNS:
            self.column(column).frombytes(wire[column])
        self.fail_reason.extend(wire["fail_reason"])


class Samples:
    def __init__(self) -> None:
        self.by_labels: dict[LabelValues, ScenarioSamples] = {}

    def of(self, labels: LabelValues) -> ScenarioSamples:
        series = self.by_labels.get(labels)
        if series is None:
            series = self.by_labels[labels] = ScenarioSamples()
        return series

    def drain(self) -> list:
        wire = [[list(labels), s.to_wire()] for labels, s in self.by_labels.items()]
        self.by_labels.clear()
        return wire

    def merge(self, wire: list) -> None:
        for labels, columns in wire:
            self.of(tuple(labels)).extend_from_wire(columns)

    def clear(self) -> None:
        self.by_labels.clear()
