"""How sure each level's verdict is, and the knee's interval that follows from them.

A level's SLO percentile is measured on a few hundred requests; near the knee it can land on either
side of its objective by chance, and the same search run again then stops one level higher or lower.
Each SLO of a level gets a 95 % interval from its own requests (a block bootstrap of the statistic,
`metrics.bootstrap`, as compare draws them; a failure ratio's is Wilson's, from scipy). A level held
beyond doubt when every interval lies under its objective, broke beyond doubt when one lies wholly
over it (or it was stopped, clearly lost), and is in doubt otherwise. The knee's interval runs from
the highest level held beyond doubt to the highest level below every level broken beyond doubt that
was not itself broken beyond doubt: it spans every level whose verdict was a coin's toss.

What it does not see: a second search on another start of the engine, which may run faster or
slower (make run's search held 8, 7 and 7 users on three fresh starts minutes apart, their probes'
TPOT 2.57 to 3.48 ms, and the first one's interval, 8 to 9, missed the others). The search's probe
of the engine (capacity/probe.py) tells two engines apart; `rerun_interval` says how far a second
search may land on an engine the probe cannot tell from this one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import binomtest

from loadwatch.capacity.probe import CHANGED
from loadwatch.metrics.bootstrap import CONFIDENCE, request_resamples
from loadwatch.metrics.records import ratio_counts
from loadwatch.metrics.slo import SLO

Sureness = Literal["held", "broke", "in doubt"]
# Per-request values in the records, in seconds; ITL is per gap and not in them (its SLO is judged as measured).
RECORD_KEYS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "elapsed_s"}
SEED = 20261127  # the same records give the same interval


@dataclass(frozen=True)
class SloInterval:
    name: str
    limit: float
    low: float | None  # None: no interval (no per-request values for it)
    high: float | None

    @property
    def verdict(self) -> Sureness | None:
        if self.low is None or self.high is None:
            return None
        return "held" if self.high <= self.limit else "broke" if self.low > self.limit else "in doubt"

    def as_dict(self) -> dict:
        return {"name": self.name, "limit": self.limit, "ci_low": self.low, "ci_high": self.high,
                "verdict": self.verdict}


def slo_interval(records: list[dict], slo: SLO) -> SloInterval:
    """The 95 % interval of an SLO's statistic over a level's requests (warm-up left out)."""
    measured = sorted((r for r in records if r["stage"] != "warmup"), key=lambda r: r["start"])
    if slo.is_ratio:
        counted, ended = ratio_counts(slo.metric, measured)
        if not ended:
            return SloInterval(slo.name, slo.limit, None, None)
        ci = binomtest(counted, ended).proportion_ci(CONFIDENCE, method="wilson")
        return SloInterval(slo.name, slo.limit, float(ci.low), float(ci.high))
    key = RECORD_KEYS.get(slo.metric)
    values = np.array([r[key] * 1000 for r in measured if key and r["failure"] is None and r.get(key) is not None])
    if len(values) < 2:
        return SloInterval(slo.name, slo.limit, None, None)
    resamples = request_resamples(values, slo.stat, np.random.default_rng(SEED))
    low, high = np.percentile(resamples, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    return SloInterval(slo.name, slo.limit, float(low), float(high))


def level_sureness(passed: bool, stopped_early: str | None, intervals: list[SloInterval]) -> Sureness:
    """A level's verdict and how sure it is: a level stopped once clearly lost broke beyond doubt; an
    SLO without an interval counts as measured."""
    if stopped_early:
        return "broke"
    verdicts = [i.verdict or ("held" if passed else "broke") for i in intervals]
    if "broke" in verdicts:
        return "broke"
    if all(v == "held" for v in verdicts):
        return "held"
    return "in doubt"


def judge(records: list[dict], slos: list[SLO], passed: bool, stopped_early: str | None) -> tuple[Sureness,
                                                                                                  list[dict]]:
    """A level's sureness and its SLOs' intervals, from its records."""
    intervals = [slo_interval(records, slo) for slo in slos]
    return level_sureness(passed, stopped_early, intervals), [i.as_dict() for i in intervals]


def knee_interval(levels: list[tuple[float, str | None]]) -> tuple[float | None, float | None]:
    """(low, high) of the load sustained, from the levels judged (value, sureness; None: not judged):
    low, the highest level held beyond doubt below every level broken beyond doubt; high, the highest
    level below those that did not break beyond doubt. (None, None) where nothing was judged."""
    judged = [(value, sure) for value, sure in levels if sure is not None]
    ceiling = min((value for value, sure in judged if sure == "broke"), default=float("inf"))
    below = [(value, sure) for value, sure in judged if value < ceiling]
    low = max((value for value, sure in below if sure == "held"), default=None)
    high = max((value for value, _ in below), default=None)
    return low, high


def rerun_interval(interval: tuple[float | None, float | None], unit: str) -> tuple[float | None, float | None]:
    """Where a second search may hold on another start of an engine whose probe agrees with this one's
    within CHANGED: the knee's interval scaled by that much speed either way, as a load the engine
    sustains scales with its speed (a first-order model: make run's three starts moved their TPOT by a
    third and their knee by one user in eight, well inside it). Users are whole, rounded outwards."""
    low, high = interval
    if high is None:
        return None, None
    low, high = (None if low is None else low / (1 + CHANGED)), high / (1 - CHANGED)
    if unit == "users":
        return (None if low is None else float(math.floor(low))), float(math.ceil(high))
    return (None if low is None else round(low, 2)), round(high, 2)
