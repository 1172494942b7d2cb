"""Open-loop arrival times, as `vllm bench serve` draws them: gamma-distributed gaps.

Shape B (burstiness) and scale 1/(R*B) give a mean gap of 1/R and a coefficient of variation of
1/sqrt(B): B = 1 is a Poisson process, B < 1 burstier, B > 1 more regular.
"""

from __future__ import annotations

import random


def gap(rng: random.Random, rate: float, burstiness: float) -> float:
    return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
