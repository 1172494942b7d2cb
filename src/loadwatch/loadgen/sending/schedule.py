"""Load shapes as plain schedules: which stage runs at which second, at which level.

A level is a number of users in a closed loop and requests per second in an open loop; the same
shapes serve both. Pure: the Locust shape class and the per-stage summaries read these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from loadwatch.settings import Shape

SHAPES: tuple[str, ...] = get_args(Shape)


@dataclass(frozen=True)
class Stage:
    name: str
    level: float
    duration: float
    ramp_from: float | None = None  # the level climbs linearly from this one over the stage

    def level_at(self, offset: float) -> float:
        if self.ramp_from is None:
            return self.level
        return self.ramp_from + (self.level - self.ramp_from) * min(1.0, offset / self.duration)


def plan(
    shape: str,
    peak: float,
    stage_duration: float,
    step_size: float | None = None,
    spike_base: float | None = None,
    sweep: list[float] | None = None,
) -> list[Stage]:
    """The stages of a shape whose highest level is `peak` (-u, or --request-rate)."""
    if stage_duration <= 0:
        raise ValueError("--stage-duration must be above 0 seconds")
    if shape == "sweep":
        if not sweep:
            raise ValueError("--shape sweep needs --sweep, e.g. --sweep 1,2,4,8")
        if any(level <= 0 for level in sweep):
            raise ValueError("--sweep levels must all be above 0")
        return [Stage(f"sweep-{i}", level, stage_duration) for i, level in enumerate(sweep, 1)]
    if peak <= 0:
        raise ValueError(f"--shape {shape} needs a peak above 0: -u users, or --request-rate")
    if shape == "step":
        size = step_size or peak / 4
        if size <= 0:
            raise ValueError("--step-size must be above 0")
        levels = []
        level = size
        while level < peak - 1e-9:
            levels.append(level)
            level += size
        levels.append(peak)
        return [Stage(f"step-{i}", level, stage_duration) for i, level in enumerate(levels, 1)]
    if shape == "ramp":
        return [Stage("ramp", peak, stage_duration, ramp_from=0.0), Stage("hold", peak, stage_duration)]
    if shape == "spike":
        base = spike_base if spike_base is not None else peak / 4
        if not 0 < base < peak:
            raise ValueError(f"--spike-base must be above 0 and below the spike's level {peak:g}")
        return [Stage("baseline", base, stage_duration), Stage("spike", peak, stage_duration),
                Stage("recovery", base, stage_duration)]
    raise ValueError(f"unknown shape {shape!r}; one of {', '.join(SHAPES)}")


def plan_run(settings, users: int) -> list[Stage]:
    """The schedule of a run's LoadSettings (with -u users); [] without --shape."""
    if not settings.shape:
        return []
    return plan(settings.shape, settings.request_rate or users, settings.stage_duration, settings.step_size,
                settings.spike_base, settings.sweep)


def level_now(stages: list[Stage], load_start: float | None, now: float) -> float:
    """The level at wall time `now` of a schedule whose clock started at `load_start` (None: not
    yet, the first stage's level holds; past the end, the last one's)."""
    if load_start is None:
        return stages[0].level_at(0.0)
    current = stage_at(stages, now - load_start)
    return current[1] if current else stages[-1].level


def stage_at(stages: list[Stage], elapsed: float) -> tuple[Stage, float] | None:
    """The stage running `elapsed` seconds into the schedule and its level then; None once over."""
    start = 0.0
    for stage in stages:
        if elapsed < start + stage.duration:
            return stage, stage.level_at(elapsed - start)
        start += stage.duration
    return None
