"""Service-level objectives given as `--slo NAME=LIMIT`, and their verdicts."""

from __future__ import annotations

import re
from dataclasses import dataclass

_LATENCY = re.compile(r"^(?P<metric>ttft|tpot|itl|e2el)_(?P<stat>mean|median|p(?P<q>\d{1,2}(?:\.\d+)?))_ms$")
FAILURE_RATIO = "failure_ratio"
# Per-request limits that decide goodput, as in `vllm bench serve --goodput`.
GOODPUT_METRICS = ("ttft", "tpot", "e2el")


@dataclass(frozen=True)
class SLO:
    name: str
    limit: float

    @property
    def metric(self) -> str:
        return FAILURE_RATIO if self.name == FAILURE_RATIO else self.name.split("_")[0]

    @property
    def stat(self) -> str:
        return "" if self.name == FAILURE_RATIO else self.name.split("_")[1]


def parse_slo(text: str) -> SLO:
    """`ttft_p99_ms=500` or `failure_ratio=0.01`; ValueError with the accepted forms otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep:
        raise ValueError(f"{text!r}: expected NAME=LIMIT, e.g. ttft_p99_ms=500")
    try:
        limit = float(value)
    except ValueError:
        raise ValueError(f"{text!r}: the limit {value!r} is not a number") from None
    if limit < 0:
        raise ValueError(f"{text!r}: the limit must not be negative")
    if name == FAILURE_RATIO:
        if limit > 1:
            raise ValueError(f"{text!r}: failure_ratio is a ratio from 0 to 1")
        return SLO(name, limit)
    match = _LATENCY.match(name)
    if not match or (match["q"] is not None and not 0 < float(match["q"]) < 100):
        raise ValueError(
            f"{text!r}: unknown SLO; use (ttft|tpot|itl|e2el)_(mean|median|pNN)_ms=MS or failure_ratio=R"
        )
    return SLO(name, limit)


def goodput_limits(slos: list[SLO]) -> dict[str, float]:
    """metric -> the tightest limit in seconds a request's own value must keep for goodput."""
    limits: dict[str, float] = {}
    for slo in slos:
        if slo.metric in GOODPUT_METRICS:
            limits[slo.metric] = min(limits.get(slo.metric, float("inf")), slo.limit / 1000.0)
    return limits


def within(limits: dict[str, float], values: dict[str, float | None]) -> bool:
    """Whether one request is good: each of its values under its limit. A request without TPOT
    (one token) cannot break a TPOT limit."""
    return all(values.get(metric) is None or values[metric] <= limit  # type: ignore[operator]
               for metric, limit in limits.items())


@dataclass(frozen=True)
class Verdict:
    slo: SLO
    measured: float | None  # None: nothing to measure, which breaks the SLO

    @property
    def passed(self) -> bool:
        return self.measured is not None and self.measured <= self.slo.limit

    def describe(self) -> str:
        unit = "" if self.slo.metric == FAILURE_RATIO else " ms"
        measured = "no data" if self.measured is None else f"{self.measured:.4g}{unit}"
        word = "met" if self.passed else "BROKEN"
        return f"SLO {self.slo.name}: {word} (measured {measured}, limit {self.slo.limit:g}{unit})"

    def as_dict(self) -> dict:
        return {"name": self.slo.name, "limit": self.slo.limit, "measured": self.measured, "passed": self.passed}
