"""Every value kept: the distribution of a per-request file read back, where exact percentiles are
affordable and wanted. Same interface as `Sketch`."""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import numpy as np


class Exact:
    def __init__(self) -> None:
        self.values = array("d")

    def add(self, value: float) -> None:
        self.values.append(value)

    def extend(self, values: Iterable[float]) -> None:
        self.values.extend(values)

    def merge(self, other: Exact) -> None:
        self.values.extend(other.values)

    def _array(self) -> np.ndarray:
        return np.frombuffer(self.values, dtype=np.float64)

    def average(self) -> float | None:
        return float(np.mean(self._array())) if self.values else None

    def std(self) -> float | None:
        return float(np.std(self._array())) if self.values else None

    def quantile(self, q: float) -> float | None:
        return float(np.percentile(self._array(), 100 * q)) if self.values else None
