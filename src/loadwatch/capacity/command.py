"""`loadwatch capacity`: the stack up (the embedded engine unless --target), levels of load until
the knee is found, the verdict and its evidence in the run folder, the stack down."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadwatch.capacity import output
from loadwatch.capacity.diagnose import diagnose
from loadwatch.capacity.levels import Level, locust_arguments, locust_base, run_level
from loadwatch.capacity.search import Search
from loadwatch.metrics.slo import FAILURE_RATIO, parse_slo
from loadwatch.processes import log_tail, port_or_free
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.engine import engine_figures
from loadwatch.run import INTERRUPTED, describe, new_run_dir
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import down, up

MAX_STRETCH = 4  # a rate-mode level runs up to this many times --level-duration to gather enough requests
NOTHING_SUSTAINABLE = 1


@dataclass
class CapacityOptions:
    locustfile: Path
    slo: list[str]
    target: str | None = None
    mode: str = "rate"
    start: float | None = None
    level_duration: float = 30.0
    warmup: float = 5.0
    max_duration: float = 1200.0
    precision: float = 0.1
    headroom: float = 0.8
    cool_down: float = 10.0  # seconds between levels: the engine drains its queue, counters are read undisturbed
    out: Path = Path("runs")
    vllm_args: list[str] = field(default_factory=list)
    locust_args: list[str] = field(default_factory=list)


def needed_requests(slos: list[str]) -> int:
    """Requests a level needs for its tightest percentile to mean something: 5 beyond it."""
    needed = 20
    for text in slos:
        slo = parse_slo(text)
        if slo.metric == FAILURE_RATIO or slo.stat == "mean":
            continue
        q = 0.5 if slo.stat == "median" else float(slo.stat[1:]) / 100
        needed = max(needed, math.ceil(5 / (1 - q)))
    return needed


def level_seconds(options: CapacityOptions, value: float, needed: int) -> float:
    if options.mode == "users":
        return options.level_duration
    return min(max(options.level_duration, needed / value), MAX_STRETCH * options.level_duration)


def rule(options: CapacityOptions, needed: int) -> str:
    longer = (f", longer (up to {MAX_STRETCH}x) until it has sent {needed} requests, 5 beyond its tightest "
              "percentile SLO" if options.mode == "rate" else "")
    return (f"{options.level_duration:g} s of load{longer}, after {options.warmup:g} s of warm-up left out of "
            f"its figures; stopped early once clearly lost (an SLO over twice its limit after 20 requests, the "
            f"engine's queue only growing, or the load generator saturated); {options.cool_down:g} s between "
            "levels.")


def capacity(options: CapacityOptions, say) -> int:
    run_dir = new_run_dir(options.out)
    settings = StackSettings()
    stack = up(settings, run_dir, options.target, options.vllm_args, client_port=port_or_free(0), say=say)
    describe(stack, say)
    try:
        options.locust_args = ["--engine-metrics", stack.engine_metrics, *options.locust_args]
        result = search(options, stack.client_port, PrometheusAPI(stack.url("prometheus")),
                        options.target or stack.target, run_dir, say)
        code = 0 if result["max_sustainable"] is not None else NOTHING_SUSTAINABLE
    except KeyboardInterrupt:
        code = INTERRUPTED
        say("interrupted: no conclusion; the levels run so far are in " + str(run_dir / "levels"))
    finally:
        for component in stack.dead():
            say(f"error: {component.name} died during the search; end of {component.log}:\n{log_tail(component.log)}")
        down(settings)
        say("stack stopped" + (" (embedded engine included)" if stack.engine_started else ""))
    return code


def search(options: CapacityOptions, client_port: int, api: PrometheusAPI, target: str, run_dir: Path,
           say) -> dict:
    """Levels of load against a stack that is up, until the knee is found; the conclusion, also
    written to run_dir. Ctrl-C stops the level running and is raised again."""
    unit = "users" if options.mode == "users" else "req/s"
    search = Search(options.start or (2.0 if options.mode == "users" else 1.0), integer=options.mode == "users",
                    precision=options.precision)
    needed = needed_requests(options.slo)
    env = {**os.environ, "LOCUST_HOST": target}
    levels: list[Level] = []
    deadline = time.monotonic() + options.max_duration
    while (value := search.next()) is not None:
        if time.monotonic() > deadline:
            say(f"--max-duration reached after {len(levels)} levels: the knee lies within what they found")
            break
        level = Level(len(levels) + 1, value, unit, f"level-{len(levels) + 1:02d}")
        seconds = level_seconds(options, value, needed)
        say(f"{level.name}: {value:g} {unit} for {seconds:.0f} s")
        results = run_dir / "levels" / f"{level.name}.json"
        results.parent.mkdir(parents=True, exist_ok=True)
        command = [*locust_base(options.locustfile, results, client_port, options.slo, options.locust_args),
                   *locust_arguments(level, seconds, options.warmup)]
        run_level(level, command, env, results, api, options.warmup, results.with_suffix(".log"))
        time.sleep(options.cool_down)
        try:
            level.engine = engine_figures(api, level.start, level.end, settle=options.cool_down)
        except PrometheusError as exc:
            say(f"warning: no engine figures for {level.name}: {exc}")
        levels.append(level)
        search.record(value, level.passed)
        verdict = "held" if level.passed else f"broke ({level.stopped_early or level.problem or 'SLO'})"
        say(f"{level.name}: {verdict}, {level.results.get('request_throughput', 0):.2f} req/s")
    best = search.best
    decisive = _decisive(levels, best)
    diagnosis = diagnose(decisive.results if decisive else {}, decisive.engine if decisive else {},
                         decisive.results.get("saturated", {}) if decisive else {})
    result = output.conclusion(options.mode, unit, levels, best, diagnosis, options.headroom, rule(options, needed))
    output.write(run_dir, result)
    say(f"capacity: {best:g} {unit} sustained, {result['recommended']:g} {unit} recommended; limit: "
        f"{diagnosis.explanation}" if best is not None else "capacity: no level held its SLOs")
    say(f"written: {run_dir}/capacity.json, report.md, {output.PLOT}")
    return result


def _decisive(levels: list[Level], best: float | None) -> Level | None:
    """The level whose figures show the limit: the lowest that broke above the best, else the highest run."""
    broke = [lv for lv in levels if not lv.passed and (best is None or lv.value > best)]
    if broke:
        return min(broke, key=lambda lv: lv.value)
    return max(levels, key=lambda lv: lv.value, default=None)
