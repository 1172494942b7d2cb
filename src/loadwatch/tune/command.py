"""`loadwatch tune`: the loop an engineer runs by hand. Find the capacity and the limit that binds;
take the levers of that limit (then of what the run missed) from the catalogue; try each against the
current configuration where it broke its SLO, in rounds, with an interval on the SLO's metric;
adopt the best that improves it beyond doubt; measure the new capacity and its limit; go on while
the budget lasts and a lever applies. Every finished step is written as it ends."""

from __future__ import annotations

import time
from pathlib import Path

from loadwatch.capacity.command import batch_of, search
from loadwatch.capacity.options import CapacityOptions
from loadwatch.capacity.probe import probe_change
from loadwatch.defaults import Part
from loadwatch.engine.settings import EngineSettings
from loadwatch.experiment.server import ServerError
from loadwatch.fleet.options import FleetOptions
from loadwatch.loadrun.locust import INTERRUPTED, LocustRun
from loadwatch.loadrun.stack import new_run_dir, on_stack
from loadwatch.metrics.capacity import Capacity, CapacityLevel
from loadwatch.metrics.repeats import times_to_resolve
from loadwatch.metrics.slo import SLO
from loadwatch.metrics.tune import Configuration, Cost, Final, Gain, Measured, Runs, Search, Step, Tune
from loadwatch.processes import ComponentError
from loadwatch.prometheus import PrometheusAPI
from loadwatch.stack.stack import StackError
from loadwatch.tune import output
from loadwatch.tune.config import Config
from loadwatch.tune.levers import Situation, applicable, no_lever
from loadwatch.tune.options import TuneOptions
from loadwatch.tune.overload import try_cap
from loadwatch.tune.server import ARGS, Server, why_refused
from loadwatch.tune.trial import JUDGED_ON, Arm, BudgetSpent, better, decide, gain, run_trial, slo_change

BAD_INPUT, INCOMPLETE = 2, 1
MIN_SEARCH = 30.0  # seconds of budget below which no capacity search is started


class Tuner:
    def __init__(self, capacity: CapacityOptions, options: TuneOptions, template: LocustRun, server: Server,
                 run_dir: Path, say) -> None:
        self.capacity, self.options, self.template, self.server = capacity, options, template, server
        self.run_dir, self.say = run_dir, say
        self.began = time.monotonic()
        self.deadline = self.began + options.budget
        self.searches: list[Search] = []  # each capacity search's name and seconds: the cost of a configuration

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def measure_capacity(self, config: Config, name: str) -> Capacity:
        """capacity.json of the configuration, its search bounded by what is left of the budget."""
        if self.left() < MIN_SEARCH:
            raise BudgetSpent
        options = self.capacity.model_copy(update={"max_duration": min(self.capacity.max_duration,
                                                                       float(round(self.left())))})
        folder = self.run_dir / name
        self.say(f"{name}: the capacity of {config_words(config)}; about {self.left() / 60:.0f} min of the budget "
                 "left")
        began = time.monotonic()
        with self.server.serving(config, folder, lambda message: None) as stack:
            template = on_stack(self.template, stack)
            result = search(options, template, PrometheusAPI(stack.url(Part.PROMETHEUS)),
                            stack.servers.request_url, folder, lambda message: self.say(f"  {message}"),
                            batch_of(options, self.server.target, list(config.vllm_args)))
        self.searches.append(Search(name=name, seconds=round(time.monotonic() - began, 1)))
        return result

    def trial_share(self) -> float:
        """Seconds a trial may spend deciding: what is left, less a capacity search as long as the
        longest so far (the one that follows an adoption)."""
        return self.left() - max((s.seconds for s in self.searches), default=0.0)

    def cost(self) -> Cost:
        """What tune spent: server starts (a model load each) and seconds, with each search's."""
        return Cost(server_starts=self.server.starts, seconds=round(time.monotonic() - self.began, 1),
                    capacity_searches=self.searches)


def limit_of(result: Capacity) -> str | None:
    """The limit a capacity search names, or None where it located no knee: its diagnosis then reads a
    level that held, where nothing binds yet (a search cut short by the budget named `outside_engine`
    at 2 users that way)."""
    return None if result.undecided else result.limit


def duration_words(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def config_words(config: Config) -> str:
    parts = [*(f"{name}={value}" for name, value in config.env), *config.vllm_args,
             *(f"{flag} {value}" for flag, value in config.fleet)]
    return " ".join(parts) or "vLLM's defaults"


def metric_of(slos: list[SLO], level: CapacityLevel) -> str:
    """The SLO a trial is judged on: the one the level broke, else the first latency one."""
    broken = [s["name"] for s in level.slo if not s["passed"]]
    latency = [slo.name for slo in slos if not slo.is_ratio]
    return (broken or latency or [slos[0].name])[0]


def where_it_broke(result: Capacity) -> CapacityLevel | None:
    """The level the trial runs at: the one the diagnosis read (the lowest that broke above the knee)."""
    return next((lv for lv in result.levels if lv.name == result.decisive_level), None)


def _interval_words(g: Gain) -> str:
    if g.change_pct is None:
        return f"{g.metric}: too few runs to compare"
    interval = "" if g.ci_low is None or g.ci_high is None else f" [{g.ci_low:+.1f}%, {g.ci_high:+.1f}%]"
    return f"{g.metric} {g.change_pct:+.1f}%{interval}"


def gain_words(row: Step) -> str:
    """The verdict's figure (goodput), then the SLO metric's change beside it."""
    if row.verdict == "refused":
        return f"refused by the server: {row.refused}"
    witness = row.decided_by not in (None, JUDGED_ON)
    return _interval_words(row.gain) + (f"; {_interval_words(row.slo_change)}" if row.slo_change else "") \
        + (f" (decided by {row.decided_by}: {JUDGED_ON}'s interval too wide, pointing the same way)"
           if witness else "")


def verdict_of(base: Arm, arm: Arm, metric: str) -> tuple[str, str | None, str | None]:
    """A lever's verdict before the best is adopted, with what would settle it and the metric that
    decided it: refused; rejected where it is decided (worse beyond doubt, or better beyond doubt:
    the best of those is then adopted, the others beaten by it stay rejected); undecided where
    neither goodput nor its second witness decides, with what would settle it. An undecided trial is
    never reported as a rejection."""
    if arm.refused:
        return "refused", None, None
    if (decided := decide(base, arm, metric)) is not None:
        return "rejected", None, decided.metric
    judged, rounds = gain(base, arm), min(len(base.goodput), len(arm.goodput))
    low, high, change = judged.ci_low, judged.ci_high, judged.change_pct
    if low is None or high is None:
        return "undecided", f"{rounds} round(s) a side gave no interval: repeat each at least 2 times", None
    times = times_to_resolve((high - low) / 2, change) if change else None
    return "undecided", (f"its interval [{low:+.1f} %, {high:+.1f} %] spans no change, nor does {metric}'s decide it; "
                         + (f"about {times} times the {rounds} rounds a side would tell a change of {change:+.1f} % "
                            "from none" if times else "more rounds a side would narrow it")), None


def step_rows(step: int, result: Capacity, arms: list[Arm], levers: list, metric: str) -> list[Step]:
    base = arms[0]
    rows = []
    for arm, (lever, change) in zip(arms[1:], levers, strict=True):
        verdict, settle, decided_by = verdict_of(base, arm, metric)
        rows.append(Step(step=step, limit=result.limit, evidence=result.evidence, change=change.record(),
                         reason=lever.reason, verdict=verdict, refused=arm.refused, settle=settle,
                         gain=gain(base, arm), slo_change=slo_change(base, arm, metric), decided_by=decided_by,
                         runs=Runs(current=base.values, with_change=arm.values, current_goodput=base.goodput,
                                   with_change_goodput=arm.goodput)))
    return rows


def tune(capacity: CapacityOptions, options: TuneOptions, template: LocustRun, target: str | None,
         vllm_args: list[str], out: Path, say, fleet: FleetOptions | None = None) -> int:
    if target is not None and (options.restart is None or ARGS not in options.restart):
        say("error: tune changes the server's flags, and a --target is restarted by your command: give --restart "
            f"'COMMAND {ARGS}' (e.g. --restart 'ssh gpu1 ./serve.sh {ARGS}'), which starts it with the flags in "
            f"place of {ARGS}")
        return BAD_INPUT
    run_dir = new_run_dir(out)
    server = Server(target, options.restart, options.ready_timeout, fleet=fleet)
    tuner = Tuner(capacity, options, template, server, run_dir, say)
    current = Config(tuple(vllm_args))
    model = "MODEL" if target else str(EngineSettings().model_dir)
    doc = Tune(budget_s=options.budget)
    result: Capacity | None = None
    code = 0
    try:
        result = tuner.measure_capacity(current, "baseline")
        doc.baseline = Configuration(**current.as_dict(), capacity=Measured.of(result), limit=limit_of(result))
        baseline_probe = result.probe
        output.write(run_dir, doc, current)
        step = 0
        while True:
            limit = limit_of(result)
            if limit is None:
                doc.stopped = (f"the knee of {config_words(current)} was not located ({result.undecided}), "
                               "so its limit is unknown and no lever can be chosen")
                break
            if options.max_steps is not None and step >= options.max_steps:
                doc.stopped = f"--max-steps ({options.max_steps}) reached"
                break
            situation = Situation(result.evidence, [m.item for m in result.missed], current,
                                  embedded=target is None, kv_cache_gib=EngineSettings().kv_cache_gib, fleet=fleet,
                                  reasons={m.item: m.evidence["routing_reason"] for m in result.missed
                                           if "routing_reason" in m.evidence})
            levers = applicable(limit, situation)
            # A limit no flag relieves ends tune, unless the run missed something a lever gives back
            # (prefix caching, prefix-aware routing): that is tried first.
            if (words := no_lever(limit, result.evidence)) and not levers:
                doc.stopped = f"the limit is {limit}: {words}"
                break
            level = where_it_broke(result)
            if not levers:
                doc.stopped = f"no lever of the catalogue applies to the limit {limit} any more"
                break
            if level is None:
                doc.stopped = "the last capacity search ran no level to compare at"
                break
            if tuner.left() < MIN_SEARCH:
                raise BudgetSpent
            step += 1
            metric = metric_of(template.slo, level)
            say(f"step {step}: {limit}: trying " + "; ".join(c.words() for _, c in levers)
                + f" at {level.level:g} {level.unit}, judged on {JUDGED_ON} within {metric}; about "
                  f"{tuner.left() / 60:.0f} min of the budget left")
            arms = [Arm("current", current), *(Arm(f"{i}-{c.flag.strip('-')}", current.with_change(c))
                                               for i, (_, c) in enumerate(levers, 1))]
            run_trial(arms, tuner.server, template, capacity, level.level, level.unit, metric, options.repeats,
                      run_dir / f"step-{step}" / "trial", tuner.left, tuner.trial_share, say)
            rows = step_rows(step, result, arms, levers, metric)
            passing = [(row, arm) for row, arm in zip(rows, arms[1:], strict=True)
                       if arm.refused is None and better(arms[0], arm, metric)]
            for row in rows:
                say(f"step {step}: {row.change.flag}: " + gain_words(row)
                    + (f": undecided ({row.settle})" if row.verdict == "undecided" else ""))
            doc.steps += rows
            if not passing:
                open_ = [row.change.flag for row in rows if row.verdict == "undecided"]
                doc.stopped = f"no lever of step {step} raised {JUDGED_ON} beyond doubt" + (
                    f"; undecided, not rejected: {', '.join(open_)} (a longer --budget gives its trial more rounds)"
                    if open_ else "")
                output.write(run_dir, doc, current)
                break
            row, arm = max(passing, key=lambda pair: pair[0].gain.change_pct or 0.0)
            row.verdict = "adopted"
            current = arm.config
            say(f"step {step}: adopted {levers[arms.index(arm) - 1][1].words()}")
            output.write(run_dir, doc, current)
            result = tuner.measure_capacity(current, f"step-{step}")
            row.capacity_after, row.limit_after = Measured.of(result), limit_of(result)
            if moved := probe_change(baseline_probe, result.probe):
                row.probe_change = moved
                say(f"step {step}: the engine alone moved from the baseline's on the same probe ({moved}): the "
                    "flag changes one request's speed, or the machine changed under tune")
            output.write(run_dir, doc, current)
        # Past the knee: where the last search found a server that queued without refusing, the
        # admission cap it sized, tried as the trade it is (tune/overload.py).
        try:
            doc.overload = try_cap(result, current, tuner.server, template, capacity, options.repeats,
                                   run_dir / "overload", tuner.left, say)
        except BudgetSpent:
            say("overload: the budget ran out before the admission cap's rounds ended; it is left untried")
    except BudgetSpent:
        # Incomplete where not one step finished: a budget too short for what tune is for.
        before = (" before the baseline's capacity was known" if not doc.baseline else
                  " before a step finished" if not doc.steps else "")
        doc.stopped = (f"the budget ({duration_words(options.budget)}) ran out{before}; an unfinished step is "
                       "left out")
        code = INCOMPLETE if before else 0
    except StackError as exc:  # the stack's own parts (a port taken, Prometheus not scraping): not the server's
        doc.stopped = f"the stack did not start: {why_refused(exc, run_dir)}"
        code = INCOMPLETE
    except (ComponentError, ServerError) as exc:
        doc.stopped = f"the server did not start: {why_refused(exc, run_dir / 'baseline')}"
        code = INCOMPLETE
    except KeyboardInterrupt:
        doc.stopped = "interrupted; the finished steps are kept"
        code = INTERRUPTED
    if doc.baseline is not None:
        last_adopted = next((s for s in reversed(doc.steps) if s.verdict == "adopted"), None)
        measured = last_adopted.capacity_after if last_adopted else doc.baseline.capacity
        limit = last_adopted.limit_after if last_adopted else doc.baseline.limit
        doc.final = Final(**current.as_dict(), capacity=measured, limit=limit,
                          command_line=current.command_line(model))
    doc.cost = tuner.cost()
    output.write(run_dir, doc, current)
    say(f"tune: {doc.stopped}" if doc.stopped else "tune: done")
    if doc.final:
        say(f"tune: final: {doc.final.command_line}")
    say(f"written: {run_dir}/tune.json (and report.md, report.html, {output.COMPOSE}, {output.ENV}, {output.PATCH})")
    return code
