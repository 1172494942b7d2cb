"""`loadwatch experiment FILE.yaml`: each arm's engine (or target) up in turn, every cell of it run
with an empty prefix cache, each cell a run folder with its report, then the summary with verdicts."""

from __future__ import annotations

import shutil
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from loadwatch.capacity.command import batch_of, search
from loadwatch.credentials import split_credentials
from loadwatch.defaults import Part
from loadwatch.durations import parse_duration
from loadwatch.engine.serving import engine_args
from loadwatch.experiment import cells as cells_of
from loadwatch.experiment import summary
from loadwatch.experiment.cells import Cell
from loadwatch.experiment.outcome import Outcome
from loadwatch.experiment.pace import MIN_COMPLETED, Pace, too_few
from loadwatch.experiment.server import ServerError, reset_prefix_cache, restart
from loadwatch.experiment.spec import Arm, Experiment, ExperimentError, load
from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.routers import RouterError
from loadwatch.interrupts import raise_if_interrupted
from loadwatch.loadrun.locust import ENOUGH, INTERRUPTED, WATCH_SECONDS, LocustRun, enough
from loadwatch.loadrun.stack import new_run_dir, on_stack, running
from loadwatch.processes import ComponentError
from loadwatch.prometheus import PrometheusAPI
from loadwatch.report.build import ReportError
from loadwatch.report.commands import annotate, write_report
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import Stack

ENGINE_START_GUESS = 60.0  # seconds an engine start adds to the first estimate of time left


@dataclass
class ExperimentOptions:
    file: Path
    locustfile: Path
    out: Path = Path("runs")
    repeats: int | None = None
    duration: float | None = None
    warmup_run: float | None = None
    cool_down: float | None = None
    grafana_url: str | None = None
    check: bool = False
    fleet: FleetOptions | None = None  # every arm on replicas behind a router, each with the arm's flags


class Progress:
    """`cell 3 of 12 ... about 7 min left`, from how long the cells done so far took."""

    def __init__(self, total: int, guess: float, say) -> None:
        self.total, self.guess, self.say = total, guess, say
        self.done = 0
        self.spent = 0.0  # seconds in cells, not in engine starts
        self.began = 0.0

    def start(self, cell: Cell, starts_left: int) -> None:
        per_cell = self.spent / self.done if self.done else self.guess
        left = per_cell * (self.total - self.done) + starts_left * ENGINE_START_GUESS
        self.say(f"cell {self.done + 1} of {self.total}: {cell.folder} ({cell.level:g} {cell.unit}); "
                 f"about {max(1, round(left / 60))} min left")
        self.began = time.monotonic()

    def finish(self) -> None:
        self.spent += time.monotonic() - self.began
        self.done += 1

    def skip(self, count: int) -> None:
        self.total -= count


def with_overrides(experiment: Experiment, options: ExperimentOptions) -> Experiment:
    update: dict = {} if options.cool_down is None else {"cool_down": options.cool_down}
    if options.repeats is not None:
        update["repeats"] = options.repeats
    load = {key: value for key, value in (("duration", options.duration), ("warmup_run", options.warmup_run))
            if value is not None}
    if load:
        update["load"] = experiment.load.model_copy(update=load)
    return experiment.model_copy(update=update)


def experiment_command(options: ExperimentOptions, say) -> int:
    try:
        spec = with_overrides(load(options.file), options)
    except ExperimentError as exc:
        say(f"error: {exc}")
        return 2
    if options.fleet and options.fleet.embedded and any(arm.target for arm in spec.arms.values()):
        say("error: --replicas starts a fleet for the arms that have no target: the arms with a target are "
            "servers of your own; run them in an experiment of their own")
        return 2
    alone = [name for name, arm in spec.arms.items() if arm.router_policy and arm.replicas is None
             and (options.fleet is None or not options.fleet.embedded)]
    if alone:
        say(f"error: arm {alone[0]} sets router_policy but starts no fleet: give it replicas, or --replicas N")
        return 2
    plan = cells_of.cells(spec)
    searched = spec.load.capacity
    per_cell = searched.max_duration / 2 if searched else spec.load.duration + spec.cool_down + 5
    starts = cells_of.blocks(plan)
    warmups = 0 if searched else len(starts) * len(spec.workloads) * spec.load.warmup_run
    shape = ("a capacity search" if searched else
             f"{len(spec.load.levels)} levels x {spec.repeats} repeats = {len(plan)} cells of {spec.load.duration:g} s")
    say(f"experiment {spec.name}: {len(spec.arms)} arms x {len(spec.workloads)} workloads x {shape}, "
        f"about {(len(plan) * per_cell + len(starts) * ENGINE_START_GUESS + warmups) / 60:.0f} min")
    try:
        scrape = parse_duration(StackSettings().scrape_interval)
    except ValueError:  # Prometheus names it, with its config, when the stack starts
        scrape = 0.0
    if not searched and spec.cool_down < scrape:
        # A counter's increase needs two scrapes in its window (the cell and its cool-down).
        say(f"note: the cool-down of {spec.cool_down:g} s is under the stack's {scrape:g} s scrape interval: "
            "engine counters (prefix-cache hit ratio, preemptions, engine E2E) can read n/a; give --cool-down "
            f"{scrape:g}s or more, or set LOADWATCH_STACK_SCRAPE_INTERVAL lower")
    if options.check:
        return 0
    stamp = new_run_dir(options.out)
    exp_dir = stamp.with_name(f"{stamp.name}-{spec.name}")
    exp_dir.mkdir(parents=True)
    shutil.copyfile(options.file, exp_dir / "experiment.yaml")
    progress = Progress(len(plan), per_cell, say)
    outcomes: list[Outcome] = []
    broken: set[str] = set()
    code = 0
    try:
        for index, (name, block) in enumerate(starts):
            raise_if_interrupted()
            if name in broken:
                continue
            later = [c for _, cells in starts[index + 1:] for c in cells if c.arm == name]
            why = run_arm(spec, name, spec.arms[name], block, len(starts) - index - 1, exp_dir, options, progress,
                          outcomes, say)
            if why is not None:  # its later rounds are not tried: they would fail the same way, slowly
                broken.add(name)
                say(f"error: arm {name} did not start, its {len(block) + len(later)} cells are skipped: {why}")
                progress.skip(len(block) + len(later))
                outcomes += [Outcome(c, exp_dir / c.folder, problem=f"the arm did not start: {why}")
                             for c in block + later]
    except KeyboardInterrupt:
        code = INTERRUPTED
        say("interrupted: the summary covers the cells that finished")
    written = summary.write(exp_dir, spec, outcomes, say)
    say(f"summary: {written.with_suffix('.html')} (and {written.name}, summary.json)")
    failed = [o for o in outcomes if o.problem]
    short = [o for o in outcomes if o.too_few]
    if failed and code == 0:
        say(f"{len(failed)} of {len(plan)} cells failed: see the summary")
        code = 1
    if short and code == 0:
        say(f"experiment incomplete: {len(short)} of {len(plan)} cells completed too few requests to judge "
            "(the summary says how many, and the duration that would do)")
        code = 1
    undecided = [o for o in outcomes if o.capacity and o.capacity.undecided]
    if undecided and code == 0:
        say(f"experiment incomplete: {len(undecided)} capacity searches did not locate the knee (see the summary)")
        code = 1
    return code


def run_arm(spec: Experiment, name: str, arm: Arm, cells: list[Cell], starts_left: int, exp_dir: Path,
            options: ExperimentOptions, progress: Progress, outcomes: list[Outcome], say) -> str | None:
    """Run one round's cells of an arm on a fresh start of its server, each outcome added to
    `outcomes` as it ends (an interruption keeps them); why the server did not start, if it did not."""
    arm_dir = exp_dir / name
    (arm_dir / "logs").mkdir(parents=True, exist_ok=True)
    with ExitStack() as arm_stack:
        try:
            if arm.restart and arm.target:
                say(f"arm {name}: restarting {arm.target}")
                with open(arm_dir / "logs" / "restart.log", "a") as log:
                    restart(arm.restart, arm.target, arm.ready_timeout, log)
            vllm_args = engine_args(arm.vllm_args, spec.endpoints)
            fleet = arm_fleet(arm, options.fleet)
            server = f"{fleet.replicas} embedded replicas behind {fleet.router_policy or 'the router'}, each" \
                if fleet and fleet.embedded else "embedded engine"
            say(f"arm {name}, round {cells[0].repeat}: " + (f"target {arm.target}" if arm.target else
                                   f"{server} with {' '.join(vllm_args) or 'its defaults'}"))
            stack = arm_stack.enter_context(running(arm_dir, arm.target, vllm_args, say,
                                                    dev_endpoints=spec.reset_prefix_cache,
                                                    fleet=fleet))
        except (ComponentError, ServerError, RouterError) as exc:
            return str(exc)
        api = PrometheusAPI(stack.url(Part.PROMETHEUS))
        target = stack.servers.request_url
        template = on_stack(LocustRun(options.locustfile), stack)
        paces: dict[str, Pace] = {}
        for cell in cells:
            raise_if_interrupted()  # one a server's start dropped (loadwatch.interrupts)
            progress.start(cell, starts_left)
            outcome = Outcome(cell, exp_dir / cell.folder)
            if not cell.search and cell.workload not in paces and spec.load.warmup_run:
                paces[cell.workload] = warm_up(spec, cell, exp_dir, target, template, options, say)
            if spec.reset_prefix_cache and (why := reset_prefix_caches(stack, target)):
                outcome.notes.append(why)
                if not any(why in o.notes for o in outcomes):
                    say(f"warning: {why}")
            if outcome.cell.search:
                search_cell(spec, outcome, target, template, api, options, say)
            else:
                run_cell(spec, outcome, target, template, paces.get(cell.workload), api, options, say)
            outcomes.append(outcome)
            progress.finish()
    return None


def arm_fleet(arm: Arm, fleet: FleetOptions | None) -> FleetOptions | None:
    """The fleet an arm runs on: the command line's, with the arm's own replicas and router policy."""
    own = {key: value for key, value in (("replicas", arm.replicas), ("router_policy", arm.router_policy))
           if value is not None}
    if not own:
        return fleet
    return (fleet or FleetOptions()).changed(own)


def reset_prefix_caches(stack: Stack, target: str) -> str | None:
    """Empty the prefix cache of each replica (a fleet's router answers for none of them), the one that
    `target` reaches at `target`, with its credentials (stack.json keeps none); None once done, else why not."""
    bare = split_credentials(target)[0]
    urls = [target if url == bare else url for url in stack.servers.replicas.values()]
    return next((why for url in urls if (why := reset_prefix_cache(url))), None)


def warm_up(spec: Experiment, cell: Cell, exp_dir: Path, target: str, template: LocustRun,
            options: ExperimentOptions, say) -> Pace:
    """A run of the cell's workload whose figures nobody compares: kernels for its shapes get
    compiled (again on every start of the engine), and its requests' E2E tells how long this
    round's cells of the arm must be."""
    folder = exp_dir / cell.arm / cell.workload / "warmup" / f"r{cell.repeat}"
    folder.mkdir(parents=True, exist_ok=True)
    locust = cells_of.cell_run(spec, cell, template, folder / "results.json", options.file.resolve().parent,
                               warmup_run=True)
    if locust.run(target, folder / "locust.log", say).code == INTERRUPTED:
        raise KeyboardInterrupt
    pace = Pace.of(locust.figures() or {}, spec.load.warmup_run)
    assert locust.load is not None
    seconds = pace.seconds(locust.load.users, locust.load.rate, spec.load.warmup_seconds)
    if seconds > spec.load.duration:
        say(f"  {cell.arm} / {cell.workload}: requests take {pace.e2e:.1f} s here (warm-up p90 E2E, "
            f"{pace.completed} completed), so its cells run {seconds:.0f} s instead of {spec.load.duration:g} s, "
            f"longer if they need to")
    return pace


def run_cell(spec: Experiment, outcome: Outcome, target: str, template: LocustRun, pace: Pace | None,
             api: PrometheusAPI, options: ExperimentOptions, say) -> None:
    outcome.folder.mkdir(parents=True, exist_ok=True)
    locust = cells_of.cell_run(spec, outcome.cell, template, outcome.folder / "results.json",
                               options.file.resolve().parent, pace)
    assert locust.load is not None
    # Its length, or on until it has the requests it needs: the warm-up's pace is a guess on a busy machine.
    planned, locust, began = locust.load.duration, locust.stretched(), time.time()
    assert locust.load is not None

    def watch() -> str | None:
        return ENOUGH if enough(locust.figures(partial=True) or {}, began, planned, MIN_COMPLETED) else None

    log = outcome.folder / "locust.log"
    code = locust.run(target, log, say, watch=watch, watch_every=WATCH_SECONDS).code
    if code == INTERRUPTED:
        raise KeyboardInterrupt
    results = locust.results
    if not results.exists():
        outcome.problem = f"Locust wrote no results (exit code {code}); see {log}"
        return
    outcome.results = results
    figures = locust.figures()
    outcome.too_few = None if figures is None else too_few(figures, locust.load, pace)
    time.sleep(spec.cool_down)  # the engine's counters reach Prometheus before they are read
    try:
        write_report(results, api, "30s", lambda message: None, settle=spec.cool_down)
    except (ReportError, OSError) as exc:
        outcome.notes.append(f"no report: {exc}")
    if options.grafana_url:
        annotate(results, options.grafana_url, None, lambda message: outcome.notes.append(message))


def search_cell(spec: Experiment, outcome: Outcome, target: str, template: LocustRun, api: PrometheusAPI,
                options: ExperimentOptions, say) -> None:
    """`loadwatch capacity`'s search on the arm's stack, with the cell's workload."""
    assert spec.load.capacity is not None
    outcome.folder.mkdir(parents=True, exist_ok=True)
    workload = cells_of.workload_flags(spec.workloads[outcome.cell.workload], options.file.resolve().parent)
    arm = spec.arms[outcome.cell.arm]
    outcome.capacity = search(spec.load.capacity, replace(template, slo=spec.slo, options=workload), api, target,
                              outcome.folder, lambda message: say(f"  {message}"),
                              batch_of(spec.load.capacity, arm.target, arm.vllm_args))
