"""One step's trial: the current configuration and each lever's, at the load where the current one
broke its SLO, in rounds (forwards, then backwards, each arm's run on a fresh start of the server,
as an experiment's rounds), and each lever's change in the SLO's metric with its interval."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from loadwatch.capacity.command import needed_requests
from loadwatch.capacity.options import CapacityOptions
from loadwatch.experiment.server import ServerError
from loadwatch.loadrun.locust import ENOUGH, INTERRUPTED, WATCH_SECONDS, Load, LocustRun, enough
from loadwatch.loadrun.stack import on_stack
from loadwatch.metrics.repeats import MIN_RUNS, change_over_runs
from loadwatch.processes import ComponentError
from loadwatch.tune.config import Config
from loadwatch.tune.server import Server, why_refused


class BudgetSpent(Exception):
    """The budget ran out before the next run could start."""


@dataclass
class Arm:
    name: str
    config: Config
    values: list[float] = field(default_factory=list)  # the SLO metric's value in each run
    refused: str | None = None  # vLLM's words, where the configuration did not start


@dataclass
class Gain:
    metric: str
    change_pct: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def passes(self) -> bool:
        """Its whole interval on the improving side: lower latency (or failure ratio)."""
        return self.ci_high is not None and self.ci_high < 0

    def as_dict(self) -> dict:
        return {"metric": self.metric, "change_pct": self.change_pct, "ci_low": self.ci_low, "ci_high": self.ci_high}


def gain(base: Arm, arm: Arm, metric: str) -> Gain:
    if len(base.values) < MIN_RUNS or len(arm.values) < MIN_RUNS:
        return Gain(metric, None, None, None)
    change = change_over_runs(base.values, arm.values, higher_is_better=False)
    return Gain(metric, change.change_pct, change.ci_low, change.ci_high)


def measure(template: LocustRun, options: CapacityOptions, level: float, unit: str, target: str,
            folder: Path, metric: str, say) -> float | None:
    """One run at the level, long enough for the SLO's percentile; the SLO's measured value."""
    load = Load.at(level, unit, options.warmup + options.level_duration, warmup_seconds=options.warmup)
    locust = replace(template, results=folder / "results.json", load=load, stage_name="trial").stretched()
    needed, began = needed_requests(template.slo), time.time()

    def watch() -> str | None:
        partial = locust.figures(partial=True) or {}
        return ENOUGH if enough(partial, began, options.warmup + options.level_duration, needed) else None

    finished = locust.run(target, folder / "locust.log", say, watch=watch, watch_every=WATCH_SECONDS)
    if finished.code == INTERRUPTED:
        raise KeyboardInterrupt
    figures = locust.figures() or {}
    return next((s["measured"] for s in figures.get("slo", []) if s["name"] == metric), None)


def run_trial(arms: list[Arm], server: Server, template: LocustRun, options: CapacityOptions, level: float,
              unit: str, metric: str, repeats: int, folder: Path, left: Callable[[], float], say) -> None:
    """Fill each arm's values, round by round; an arm that does not start is refused and not tried
    again. BudgetSpent where the budget ends before a run: the trial is then unfinished."""
    for round_ in range(1, repeats + 1):
        order = arms if round_ % 2 else arms[::-1]
        for arm in order:
            if arm.refused is not None:
                continue
            if left() <= 0:
                raise BudgetSpent
            where = folder / arm.name / f"r{round_}"
            say(f"  round {round_} of {repeats}: {arm.name} at {level:g} {unit}")
            try:
                with server.serving(arm.config, where, lambda message: None) as stack:
                    run = on_stack(template, stack)
                    value = measure(run, options, level, unit, server.target or stack.target, where, metric, say)
            except (ComponentError, ServerError) as exc:
                arm.refused = why_refused(exc, where)
                say(f"  {arm.name} refused: {arm.refused}")
                continue
            if value is not None:
                arm.values.append(value)
