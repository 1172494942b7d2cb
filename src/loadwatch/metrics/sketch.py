"""Distributions in bounded memory, for runs of any length: the run's percentiles without keeping
every value.

A `Sketch` counts values in logarithmic buckets (DDSketch's): every value of bucket k lies in
(GAMMA^(k-1), GAMMA^k], so the bucket's representative is within ACCURACY of each of them. A
quantile is found by rank as numpy's `percentile` finds it (linear interpolation between the two
values around rank q*(n-1)), each of the two read from its bucket: the result is within ACCURACY
(0.5 %) of numpy's on the same values. Count, mean and standard deviation are exact (Welford's
running moments, merged with Chan's formula). Sketches merge exactly, bucket by bucket: a master
adding its workers' sketches holds what one process seeing every value would.

Written here rather than taken from the `ddsketch` package: the interpolated quantile needs the
value at a given rank, which that package does not expose, and its wire format is protobuf, where
Locust's messages carry plain msgpack.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

ACCURACY = 0.005
GAMMA = (1 + ACCURACY) / (1 - ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
SMALLEST = 1e-9  # at or below (a gap of 0 between two chunks read at once) a value counts as 0


class Sketch:
    __slots__ = ("bins", "zeros", "count", "mean", "m2", "low", "high")

    def __init__(self) -> None:
        self.bins: dict[int, int] = {}
        self.zeros = 0
        self.count = 0
        self.mean = 0.0
        self.m2 = 0.0  # sum of squared deviations from the mean
        self.low = math.inf
        self.high = -math.inf

    def add(self, value: float) -> None:
        self.count += 1
        delta = value - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (value - self.mean)
        if value < self.low:
            self.low = value
        if value > self.high:
            self.high = value
        if value <= SMALLEST:
            self.zeros += 1
        else:
            key = math.ceil(math.log(value) / _LOG_GAMMA)
            self.bins[key] = self.bins.get(key, 0) + 1

    def extend(self, values: Iterable[float]) -> None:
        """`add` for each value, in order (the same arithmetic, so the same result), with the state in
        locals: a request's inter-token gaps come here, one per streamed chunk, on the load
        generator's hottest path after the stream itself."""
        bins, count, mean, m2, low, high, zeros = self.bins, self.count, self.mean, self.m2, self.low, self.high, \
            self.zeros
        log, ceil, get = math.log, math.ceil, bins.get
        for value in values:
            count += 1
            delta = value - mean
            mean += delta / count
            m2 += delta * (value - mean)
            if value < low:
                low = value
            if value > high:
                high = value
            if value <= SMALLEST:
                zeros += 1
            else:
                key = ceil(log(value) / _LOG_GAMMA)
                bins[key] = get(key, 0) + 1
        self.count, self.mean, self.m2, self.low, self.high, self.zeros = count, mean, m2, low, high, zeros

    def merge(self, other: Sketch) -> None:
        if other.count == 0:
            return
        total = self.count + other.count
        delta = other.mean - self.mean
        self.m2 += other.m2 + delta * delta * self.count * other.count / total
        self.mean += delta * other.count / total
        self.count = total
        self.zeros += other.zeros
        self.low, self.high = min(self.low, other.low), max(self.high, other.high)
        for key, n in other.bins.items():
            self.bins[key] = self.bins.get(key, 0) + n

    def since(self, earlier: Sketch) -> Sketch:
        """The values added after `earlier`, a copy of this sketch taken before: buckets subtract.
        The extremes stay this sketch's (a bound on the window's); a sketch emptied in between (a
        new run) is whole."""
        if earlier.count > self.count:
            earlier = Sketch()
        window = Sketch()
        window.count = self.count - earlier.count
        if window.count == 0:
            return window
        window.mean = (self.mean * self.count - earlier.mean * earlier.count) / window.count
        window.zeros = self.zeros - earlier.zeros
        window.bins = {k: n - earlier.bins.get(k, 0) for k, n in self.bins.items() if n > earlier.bins.get(k, 0)}
        window.low, window.high = self.low, self.high
        return window

    def copy(self) -> Sketch:
        twin = Sketch()
        twin.merge(self)
        return twin

    def std(self) -> float | None:
        """Population standard deviation, as numpy's (and vllm bench serve's) std."""
        return math.sqrt(max(self.m2, 0.0) / self.count) if self.count else None

    def average(self) -> float | None:
        return self.mean if self.count else None

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0..1) as numpy.percentile(values, 100 q) would give it, within ACCURACY."""
        if self.count == 0:
            return None
        rank = q * (self.count - 1)
        below = math.floor(rank)
        lower, upper = self._at_ranks(below, min(below + 1, self.count - 1))
        return lower + (rank - below) * (upper - lower)

    def _at_ranks(self, first: int, second: int) -> tuple[float, float]:
        """The values at two ranks (0-based, first <= second), each within ACCURACY."""
        found: list[float] = []
        seen = self.zeros
        while len(found) < 2 and (first if not found else second) < seen:
            found.append(0.0)
        for key in sorted(self.bins):
            seen += self.bins[key]
            while len(found) < 2 and (first if not found else second) < seen:
                found.append(self._value(key))
            if len(found) == 2:
                break
        return found[0], found[1]

    def _value(self, key: int) -> float:
        # The bucket's midpoint in relative terms, kept within what was seen: the extremes are exact.
        return min(max(2 * GAMMA**key / (GAMMA + 1), self.low), self.high)

    def to_wire(self) -> list:
        """Plain lists and numbers, as Locust's msgpack messages carry them."""
        return [list(self.bins), list(self.bins.values()), self.zeros, self.count, self.mean, self.m2,
                self.low, self.high]

    @classmethod
    def from_wire(cls, wire: list) -> Sketch:
        sketch = cls()
        keys, counts, sketch.zeros, sketch.count, sketch.mean, sketch.m2, sketch.low, sketch.high = wire
        sketch.bins = dict(zip(keys, counts, strict=True))
        return sketch
