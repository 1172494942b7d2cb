"""The % change between two groups of repeated runs, each run one observation of a figure (its
median TTFT, its throughput): Welch's t interval on the logs of the runs' figures, turned back
into a ratio of the groups' geometric means.

A latency or a throughput is positive and its change is a ratio: a 2x slower arm is +100 %, a 2x
faster one -50 %, never -138 %. Welch's t on the raw figures, divided by the baseline, is symmetric
and unbounded, and with three noisy runs a side it said the impossible. On the log scale the
interval is symmetric in the ratio's log, so back on the percentage scale it is bounded below by
-100 % and as wide upwards as a slowdown of the same factor; runs whose spread grows with their
level (as latencies' does) are near normal there, which is what Welch assumes.

With two or three runs a side a bootstrap over them cannot be trusted: resampling two values gives
a handful of distinct means and ignores how little two values say about the spread, where t's
quantile (4.3 for two degrees of freedom, against the normal's 1.96) does not.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from loadwatch.metrics.bootstrap import CONFIDENCE, Change, verdict

MIN_RUNS = 2  # runs a side below which run-level figures get no interval and no verdict


def times_to_resolve(half_width: float, effect: float) -> int:
    """How many times the observations (runs or rounds a side) an interval of ±`half_width` % needs to
    narrow to `effect` %: an interval narrows as one over the square root of the observations."""
    return math.ceil((half_width / abs(effect)) ** 2)


def log_interval(base: np.ndarray, new: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """Welch's interval on the difference of the mean logs, along the last axis: groups of runs
    (positive figures) in, the % change's low and high out. Vectorised, so that a simulation of
    thousands of experiments costs one call."""
    interval = stats.ttest_ind(np.log(new), np.log(base), equal_var=False, axis=-1).confidence_interval(confidence)
    return _pct(np.exp(interval.low)), _pct(np.exp(interval.high))


def change_over_runs(base: list[float], new: list[float], higher_is_better: bool,
                     confidence: float = CONFIDENCE) -> Change:
    """MIN_RUNS or more runs a side; the point is the ratio of the geometric means, as a % change."""
    if len(base) < MIN_RUNS or len(new) < MIN_RUNS:
        raise ValueError(f"a change over runs needs {MIN_RUNS} runs a side or more")
    if min(base) <= 0 or min(new) <= 0:
        return Change(float(_pct(np.mean(new) / np.mean(base))) if np.mean(base) > 0 else None)
    log_base, log_new = np.log(base), np.log(new)
    point = float(_pct(np.exp(np.mean(log_new) - np.mean(log_base))))
    if np.var(log_base) == 0 and np.var(log_new) == 0:
        return Change(point, point, point, verdict(point, point, higher_is_better))  # runs that never vary
    low, high = (float(v) for v in log_interval(np.asarray(base), np.asarray(new), confidence))
    if math.isnan(low) or math.isnan(high):
        return Change(point)
    return Change(point, low, high, verdict(low, high, higher_is_better))


def _pct(ratio):
    return (ratio - 1) * 100
