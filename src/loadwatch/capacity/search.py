"""Which load level to try next: a geometric ramp up to the first level that breaks an SLO, then
bisection between the highest level that held and the lowest that broke, to a stated precision.
Pure: levels and verdicts in, the next level out."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Search:
    start: float
    integer: bool  # users are whole; request rates are not
    precision: float = 0.1  # the knee is known when the lowest broken level is within this of the highest held
    factor: float = 2.0
    floor: float = 0.1  # below this (or 1 user) nothing is sustainable
    held: list[float] = field(default_factory=list)
    broke: list[float] = field(default_factory=list)
    # Levels that completed too few requests to judge while under their SLOs: the knee lies above
    # them (more load completes more requests), but none of them is a level that held.
    unjudged: list[float] = field(default_factory=list)

    def record(self, level: float, passed: bool) -> None:
        (self.held if passed else self.broke).append(level)

    def too_few(self, level: float) -> None:
        self.unjudged.append(level)

    @property
    def best(self) -> float | None:
        """The highest level that held, below every level that broke."""
        below = [h for h in self.held if not self.broke or h < min(self.broke)]
        return max(below, default=None)

    def _round(self, level: float) -> float:
        # Three significant figures: a rate of 20.7 req/s, not 20.749.
        return float(max(1, round(level))) if self.integer else float(f"{level:.3g}")

    def next(self) -> float | None:
        """The next level to run, or None when the knee is found (or nothing is sustainable)."""
        if not self.held and not self.broke and not self.unjudged:
            return self._round(self.start)
        best = self.best
        floor = max(self.unjudged, default=None)
        if not self.broke:
            return self._round(max([*self.held, *self.unjudged]) * self.factor)
        high = min(self.broke)
        # Bisect above the highest level that held, or above one that could not be judged (below it
        # nothing can be), whichever is higher.
        low = max((b for b in (best, floor) if b is not None), default=None)
        if low is None:  # the first level already broke: go down
            level = self._round(high / self.factor)
            lowest = 1.0 if self.integer else self.floor
            return None if high <= lowest or level >= high else max(level, lowest)
        if self.integer and high - low <= 1:
            return None
        if not self.integer and high / low - 1 <= self.precision:
            return None
        level = self._round(math.sqrt(low * high))  # halfway on the geometric scale the ramp used
        return None if level in (low, high) else level
