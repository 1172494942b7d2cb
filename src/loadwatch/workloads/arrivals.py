"""Open-loop arrival times, as `vllm bench serve` draws them: gamma-distributed gaps.

Shape B (burstiness) and scale 1/(R*B) give a mean gap of 1/R and a coefficient of variation of
1/sqrt(B): B = 1 is a Poisson process, B < 1 burstier, B > 1 more regular. Gaps are drawn at rate 1
and spent at the rate of the moment, so a load shape can change the rate between two arrivals.
"""

from __future__ import annotations

import random


def gap(rng: random.Random, burstiness: float) -> float:
    """The next gap at rate 1 (mean 1): at a steady rate R the wait is gap / R."""
    return rng.gammavariate(burstiness, 1.0 / burstiness)


def spend(need: float, rate: float, horizon: float) -> tuple[float, float]:
    """Wait toward an arrival `need` unit-rate seconds away at `rate` per second, for `horizon`
    seconds at most: how long to wait now, and what is left of `need` after it."""
    if rate * horizon >= need:
        return need / rate, 0.0
    return horizon, need - rate * horizon
