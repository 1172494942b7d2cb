"""The cells of an experiment (arm x workload x level x repeat) and each one's Locust command."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import groupby
from pathlib import Path

from loadwatch.experiment.pace import Pace
from loadwatch.experiment.spec import Experiment
from loadwatch.loadrun.locust import Load, LocustRun


@dataclass(frozen=True)
class Cell:
    arm: str
    workload: str
    level: float
    unit: str  # users or req/s
    repeat: int  # from 1
    many_levels: bool

    search: bool = False  # a capacity search rather than one level

    @property
    def level_name(self) -> str:
        return f"{self.level:g}-users" if self.unit == "users" else f"{self.level:g}-rps"

    @property
    def group(self) -> Path:
        """The folder of the cell's repeats, under the experiment's."""
        return Path(self.arm, self.workload, *([self.level_name] if self.many_levels else []))

    @property
    def folder(self) -> Path:
        return self.group / ("capacity" if self.search else f"r{self.repeat}")

    def run_name(self, experiment: str) -> str:
        """The start of the cell's run_id: the experiment and the cell, so Prometheus tells them apart."""
        return ".".join([experiment, self.arm, self.workload, *([self.level_name] if self.many_levels else []),
                         f"r{self.repeat}"])


def cells(experiment: Experiment) -> list[Cell]:
    """The cells in the order they run: round by round, round r holding every arm's r-th repeat of
    each workload and level, the arms taken forwards in odd rounds and backwards in even ones
    (A B, B A, A B). Each arm's stretch of a round is one start of its server (`blocks`).

    All of one arm's repeats before the next arm's would put the machine's drift and each arm's one
    engine start into the arms' difference, where the interval over the repeats, which sees only
    how runs on one engine start differ, cannot see it: the embedded engine's dynamic prefix came
    out 2 % "better" and 2 % "worse" with caching in runs of that order. With a capacity search,
    one search per arm and workload."""
    if experiment.load.capacity is not None:
        return [Cell(arm, workload, 0.0, experiment.load.capacity.unit, 1, False, search=True)
                for arm in experiment.arms for workload in experiment.workloads]
    levels = experiment.load.levels
    arms = list(experiment.arms)
    return [Cell(arm, workload, level, unit, repeat, len(levels) > 1)
            for repeat in range(1, experiment.repeats + 1) for arm in (arms if repeat % 2 else arms[::-1])
            for workload in experiment.workloads for level, unit in levels]


def blocks(plan: list[Cell]) -> list[tuple[str, list[Cell]]]:
    """The plan cut where the arm or the round changes: each piece runs on one start of its arm's
    server. An arm's two rounds side by side (B in A B, B A) are two starts too: what an arm's
    repeats are to measure includes how its server differs from one start to the next."""
    return [(arm, list(group)) for (arm, _), group in groupby(plan, key=lambda cell: (cell.arm, cell.repeat))]


def workload_flags(options: dict, relative_to: Path) -> list[str]:
    """A workload's options as the load generator's flags; a dataset path is the experiment file's."""
    flags: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags += [flag] if value else []
        elif isinstance(value, list):
            flags += [flag, ",".join(str(v) for v in value)]
        elif key == "dataset_path":
            flags += [flag, str(relative_to / value)]
        else:
            flags += [flag, str(value)]
    return flags


def cell_run(experiment: Experiment, cell: Cell, template: LocustRun, results: Path, source_dir: Path,
             pace: Pace | None = None, warmup_run: bool = False) -> LocustRun:
    """The cell's Locust run, as long as the server's pace needs (`pace`, from the warm-up run) and
    at least the file's duration; `warmup_run`: the run thrown away before the workload's first
    cell on an arm, which measures that pace."""
    spec = experiment.load
    warmup = {} if warmup_run else {"warmup_requests": spec.warmup_requests, "warmup_seconds": spec.warmup_seconds}
    load = Load.at(cell.level, cell.unit, spec.warmup_run if warmup_run else spec.duration, **warmup)
    if pace is not None and not warmup_run:
        load = load.model_copy(update={"duration": max(load.duration, pace.seconds(load.users, load.rate,
                                                                                   spec.warmup_seconds))})
    name = cell.run_name(experiment.name)
    return replace(template, results=results, load=load, slo=experiment.slo,
                   run_name=name.rsplit(".", 1)[0] + ".warmup" if warmup_run else name,
                   # A warm-up run's requests in flight finish, however slow: their E2E is the pace.
                   stop_timeout=60.0 if warmup_run else pace.stop_timeout if pace else 10.0,
                   options=workload_flags(experiment.workloads[cell.workload], source_dir))
