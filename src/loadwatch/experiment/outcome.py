"""What one cell of an experiment left behind."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadwatch.experiment.cells import Cell
from loadwatch.metrics.capacity import Capacity


@dataclass
class Outcome:
    cell: Cell
    folder: Path
    results: Path | None = None  # None: the cell produced no results
    problem: str | None = None
    too_few: str | None = None  # the cell ran, but completed too few requests to judge: why, in words
    notes: list[str] = field(default_factory=list)
    capacity: Capacity | None = None  # a capacity search's conclusion
