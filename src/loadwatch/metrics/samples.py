"""Per-request figures kept column by column, for exact percentiles like `vllm bench serve`.

Histograms answer Prometheus; the end-of-run summary and SLO verdicts need every value, so
workers also ship these columns (as packed doubles) and the master concatenates them.
"""

from __future__ import annotations

from array import array
from collections import Counter

from loadwatch.metrics.timing import RequestMetrics

LabelValues = tuple[str, ...]
NAN = float("nan")
COLUMNS = ("start", "end", "ttft", "e2e", "tpot", "prompt_tokens", "completion_tokens", "itl", "fail_start", "fail_end")


class ScenarioSamples:
    """Columns of one (model, scenario); row i of the success columns is one request."""

    def __init__(self) -> None:
        for column in COLUMNS:
            setattr(self, column, array("d"))
        self.failures: Counter[str] = Counter()

    def add_success(self, started_at: float, m: RequestMetrics) -> None:
        self.start.append(started_at)
        self.end.append(started_at + m.e2e)
        self.ttft.append(m.ttft)
        self.e2e.append(m.e2e)
        self.tpot.append(NAN if m.tpot is None else m.tpot)
        self.prompt_tokens.append(NAN if m.prompt_tokens is None else m.prompt_tokens)
        self.completion_tokens.append(NAN if m.completion_tokens is None else m.completion_tokens)
        self.itl.extend(m.itl)

    def add_failure(self, started_at: float, elapsed: float, reason: str) -> None:
        self.fail_start.append(started_at)
        self.fail_end.append(started_at + elapsed)
        self.failures[reason] += 1

    @property
    def completed(self) -> int:
        return len(self.ttft)

    @property
    def failed(self) -> int:
        return len(self.fail_start)

    def to_wire(self) -> dict:
        wire = {column: getattr(self, column).tobytes() for column in COLUMNS}
        wire["failures"] = dict(self.failures)
        return wire

    def extend_from_wire(self, wire: dict) -> None:
        for column in COLUMNS:
            getattr(self, column).frombytes(wire[column])
        self.failures.update(wire["failures"])


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
