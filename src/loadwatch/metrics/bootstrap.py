"""Confidence intervals of a % change from per-request records, by bootstrap, where a side has a
single run: raw values in, an interval and a verdict out.

Requests are resampled in blocks of consecutive ones, since requests close in time share the
engine's state; a side that has several runs draws them too (a hierarchical bootstrap). With one
run a side the interval cannot see how much a second run would differ as a whole: with two runs a
side or more, the runs are the observations instead (`metrics.repeats`).

scipy.stats.bootstrap resamples independent observations, not blocks of requests or runs and then
their blocks; this is written with numpy for that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
# A larger run is resampled from this many of its requests, drawn at random: its interval can only
# get wider (conservative), and the cost stays that of 20,000 requests.
MAX_REQUESTS = 20_000
CHUNK = 100  # resamples computed at once: memory is CHUNK x requests values
BLOCKS = 10  # blocks of consecutive requests in each resample of a run
Verdict = Literal["better", "worse", "same"]


def statistic(values: np.ndarray, stat: str) -> np.ndarray:
    """`mean`, `median` or `pNN` along the last axis."""
    if stat == "mean":
        return values.mean(axis=-1)
    if stat == "median":
        return np.median(values, axis=-1)
    return np.percentile(values, float(stat[1:]), axis=-1)


def request_resamples(values: np.ndarray, stat: str, rng: np.random.Generator,
                      resamples: int = RESAMPLES) -> np.ndarray:
    """The statistic of `resamples` circular block resamples of one run's requests, in time order.

    Requests close in time share the engine's state (its batch, its queue, a closed loop's phase),
    so they are not independent: resampling them one by one gives intervals too narrow to hold a
    second run of the same configuration. Each resample joins BLOCKS blocks of consecutive requests
    (a tenth of the run each) from random starts, which carries that dependence, and a drift within
    the run, into the interval.
    """
    if len(values) > MAX_REQUESTS:
        values = values[:: -(-len(values) // MAX_REQUESTS)]  # every k-th: the time order stays
    n = len(values)
    length = -(-n // BLOCKS)
    out = np.empty(resamples)
    for start in range(0, resamples, CHUNK):
        size = min(CHUNK, resamples - start)
        starts = rng.integers(n, size=(size, BLOCKS, 1))
        picked = values[(starts + np.arange(length)) % n].reshape(size, BLOCKS * length)
        out[start:start + size] = statistic(picked, stat)
    return out


def group_resamples(runs: list[np.ndarray], stat: str, rng: np.random.Generator,
                    resamples: int = RESAMPLES) -> np.ndarray:
    """The group's figure in each resample: runs drawn with replacement, each from its own resamples."""
    per_run = np.stack([request_resamples(values, stat, rng, resamples) for values in runs])
    if len(runs) > 1:
        # Resampling k runs spreads their mean by (k-1)/k of its unbiased variance (a half, for two
        # repeats): each run's deviation from the group's figure is scaled by sqrt(k/(k-1)) to undo it.
        points = np.array([float(statistic(values, stat)) for values in runs])
        per_run += ((np.sqrt(len(runs) / (len(runs) - 1)) - 1) * (points - points.mean()))[:, None]
    drawn = rng.integers(len(runs), size=(resamples, len(runs)))
    which = rng.integers(resamples, size=(resamples, len(runs)))  # an independent resample per draw
    return per_run[drawn, which].mean(axis=1)


@dataclass(frozen=True)
class Change:
    change_pct: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    verdict: Verdict | None = None  # None: no interval (one run a side for a run-level figure, or no data)


def verdict(ci_low: float, ci_high: float, higher_is_better: bool) -> Verdict:
    if ci_low <= 0 <= ci_high:
        return "same"
    return "better" if (ci_low > 0) == higher_is_better else "worse"


def change(base: float | None, new: float | None, base_resamples: np.ndarray | None,
           new_resamples: np.ndarray | None, higher_is_better: bool, confidence: float = CONFIDENCE) -> Change:
    """The % change of `new` against `base`, with its percentile interval where both have resamples."""
    if base is None or new is None or base == 0:
        return Change(None)
    pct = (new - base) / base * 100
    if base_resamples is None or new_resamples is None:
        return Change(pct)
    with np.errstate(divide="ignore", invalid="ignore"):
        changes = (new_resamples - base_resamples) / base_resamples * 100
    changes = changes[np.isfinite(changes)]
    if len(changes) == 0:
        return Change(pct)
    tail = (1 - confidence) / 2 * 100
    low, high = (float(v) for v in np.percentile(changes, [tail, 100 - tail]))
    return Change(pct, low, high, verdict(low, high, higher_is_better))
