"""Service-level objectives given as `--slo NAME=LIMIT`, and their verdicts."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

_LATENCY = re.compile(r"^(?P<metric>ttft|tpot|itl|e2el)_(?P<stat>mean|median|p(?P<q>\d{1,2}(?:\.\d+)?))_ms$")
FAILURE_RATIO = "failure_ratio"
REJECTED_RATIO = "rejected_ratio"  # of the requests that ended, those the server refused at admission
RATIOS = (FAILURE_RATIO, REJECTED_RATIO)  # SLOs on a share of the requests, from 0 to 1, not on a latency
# Per-request limits that decide goodput, as in `vllm bench serve --goodput`.
GOODPUT_METRICS = ("ttft", "tpot", "e2el")


# What a valid SLO looks like: the end of every refusal, wherever an SLO is read.
FORMS = ("an SLO is METRIC_STAT_ms=MS, METRIC one of ttft, tpot, itl, e2el and STAT mean, median or pNN "
         "(p90, p99.9), e.g. ttft_p99_ms=500; or failure_ratio=R or rejected_ratio=R, from 0 to 1")


@dataclass(frozen=True)
class SLO:
    name: str
    limit: float

    @property
    def metric(self) -> str:
        return self.name if self.is_ratio else self.name.split("_")[0]

    @property
    def stat(self) -> str:
        return "" if self.is_ratio else self.name.split("_")[1]

    @property
    def is_ratio(self) -> bool:
        """A share of the requests (failure_ratio, rejected_ratio), not a latency."""
        return self.name in RATIOS

    def __str__(self) -> str:
        """NAME=LIMIT, as --slo takes it: how an SLO goes on to Locust's command line and into files."""
        return f"{self.name}={repr(self.limit).removesuffix('.0')}"  # repr: the shortest that reads back


def parse_slo(text: str) -> SLO:
    """`ttft_p99_ms=500`, `failure_ratio=0.01` or `rejected_ratio=0.01`; ValueError saying what is wrong
    and what an SLO is."""
    name, sep, value = text.partition("=")
    name = name.strip()
    try:
        limit = float(value)
    except ValueError:
        limit = math.nan
    match = _LATENCY.match(name)
    if not sep:
        problem = "not NAME=LIMIT"
    elif name not in RATIOS and (not match or (match["q"] is not None and not 0 < float(match["q"]) < 100)):
        problem = "unknown SLO"
    elif not math.isfinite(limit):
        problem = f"the limit {value.strip()!r} is not a number"
    elif limit < 0:
        problem = "the limit is negative"
    elif name in RATIOS and limit > 1:
        problem = f"{name} is over 1"
    else:
        return SLO(name, limit)
    raise ValueError(f"{text!r}: {problem}; {FORMS}")


def _parsed(value: object) -> object:
    return parse_slo(value) if isinstance(value, str) else value


# An SLO in a pydantic model (a command's options, an experiment file, the load generator's settings):
# given as its text, checked as it is read, kept typed, written back as its text.
Objective = Annotated[SLO, BeforeValidator(_parsed), PlainSerializer(str)]


def ratio(metric: str, completed: int, failed: int, rejected: int) -> float | None:
    """failure_ratio or rejected_ratio: the failed or the rejected over every request that ended
    (completed, failed or refused; a hang-up is the client's, in neither). None where none ended."""
    ended = completed + failed + rejected
    return (failed if metric == FAILURE_RATIO else rejected) / ended if ended else None


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
        unit = "" if self.slo.is_ratio else " ms"
        measured = "no data" if self.measured is None else f"{self.measured:.4g}{unit}"
        word = "met" if self.passed else "BROKEN"
        return f"SLO {self.slo.name}: {word} (measured {measured}, limit {self.slo.limit:g}{unit})"

    def as_dict(self) -> dict:
        return {"name": self.slo.name, "limit": self.slo.limit, "measured": self.measured, "passed": self.passed}


def held_since(verdicts: list[tuple[float, bool | None]]) -> float | None:
    """Where the SLOs held again, from windows in time order (start, verdict; None: not judged): the
    start of the first judged window from which every judged one holds; None where the last judged one
    broke, or none was judged. A recovery is read so (a fleet's change, a fault): one good window
    amid bad ones is not the fleet serving again."""
    since = None
    for at, verdict in verdicts:
        if verdict is False:
            since = None
        elif verdict is True and since is None:
            since = at
    return since
