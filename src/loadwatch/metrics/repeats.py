"""The % change between two groups of repeated runs, each run one observation of a figure (its
median TTFT, its throughput): Welch's t interval on the difference of the groups' means, as a
share of the baseline's mean.

With two or three runs a side, a bootstrap over them cannot be trusted: resampling two values
gives a handful of distinct means and ignores how little two values say about the spread, where
t's quantile (4.3 for two degrees of freedom, against the normal's 1.96) does not. Measured on the
embedded engine, runs of one configuration differ by more than their requests vary, so with
repeats the runs are the unit and this is the interval.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from loadwatch.metrics.bootstrap import CONFIDENCE, Change, verdict


def change_over_runs(base: list[float], new: list[float], higher_is_better: bool,
                     confidence: float = CONFIDENCE) -> Change:
    """Two or more runs a side; the change's point is the means', its interval Welch's."""
    base_mean, new_mean = float(np.mean(base)), float(np.mean(new))
    if base_mean == 0:
        return Change(None)
    pct = (new_mean - base_mean) / base_mean * 100
    if np.var(base) == 0 and np.var(new) == 0:
        return Change(pct, pct, pct, verdict(pct, pct, higher_is_better))  # runs that never vary
    interval = stats.ttest_ind(new, base, equal_var=False).confidence_interval(confidence)
    low, high = (float(v) / base_mean * 100 for v in (interval.low, interval.high))
    if math.isnan(low) or math.isnan(high):
        return Change(pct)
    return Change(pct, low, high, verdict(low, high, higher_is_better))
