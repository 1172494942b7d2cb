"""One step's trial: the current configuration and each lever's, at the load where the current one
broke its SLO, in rounds (forwards, then backwards: A B B A, each arm's run on a fresh start of the
server, as an experiment's rounds), each lever judged by what users buy there.

A lever is judged on goodput, the requests a second that met every per-request SLO, and not on the
SLO's percentile. At the knee a percentile of the current configuration's TTFT is a queue's tail: it
ran 409, 509 and 882 ms in three rounds of the tune guide's prefix scenario, and no three rounds a
side told prefix caching from noise. Goodput at the same load moved +55 % with caching there, far
beyond its spread. The SLO metric's change is kept beside it, for the report.

Goodput has a weakness of its own: where the current configuration is badly broken, it serves
almost nothing within the SLO, and its goodput jumps by tens of times between rounds (0.007 to 2.5
req/s in four rounds of the tune guide's slots scenario), so that the change's interval on the log
scale spans everything (+567 % [-91 %, +49,888 %]) while the SLO metric moved -96.8 % [-98.8 %,
-91.3 %]. There the SLO metric is the second witness (`decide`): a lever whose goodput points the
same way and whose SLO metric's whole interval is on that side is decided by it; it is the metric
that broke at this load, and goodput pointing along it says the lever did not trade it for less
served.

After `--repeats` rounds, rounds go on, for the current arm and the levers still undecided (that
might yet beat one already better beyond doubt), while the trial's share of the budget lasts (what
is left less the capacity search that follows an adoption) and up to EXTENSION times the rounds
asked: an undecided trial is a question of data, and tune spends its budget on the answer before it
says "undecided"."""

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
from loadwatch.metrics.tune import Gain
from loadwatch.processes import ComponentError, log_tail
from loadwatch.stack.stack import StackError
from loadwatch.tune.config import Config
from loadwatch.tune.options import EXTENSION
from loadwatch.tune.server import Server, why_refused

JUDGED_ON = "request_goodput"


class BudgetSpent(Exception):
    """The budget ran out before the next run could start."""


@dataclass
class Arm:
    name: str
    config: Config
    values: list[float] = field(default_factory=list)  # the SLO metric's value in each run
    goodput: list[float] = field(default_factory=list)  # request_goodput in each run
    refused: str | None = None  # vLLM's words, where the configuration did not start


def _change(base: list[float], new: list[float], metric: str, higher_is_better: bool) -> Gain:
    if len(base) < MIN_RUNS or len(new) < MIN_RUNS:
        return Gain(metric=metric)
    change = change_over_runs(base, new, higher_is_better=higher_is_better)
    return Gain(metric=metric, change_pct=change.change_pct, ci_low=change.ci_low, ci_high=change.ci_high)


def gain(base: Arm, arm: Arm) -> Gain:
    """The lever's change in goodput, the verdict's."""
    return _change(base.goodput, arm.goodput, JUDGED_ON, higher_is_better=True)


def slo_change(base: Arm, arm: Arm, metric: str) -> Gain:
    """The lever's change in the SLO's own metric, shown beside the verdict's."""
    return _change(base.values, arm.values, metric, higher_is_better=False)


def decide(base: Arm, arm: Arm, metric: str) -> Gain | None:
    """The interval that decides the lever, better (change_pct > 0 for goodput, < 0 for the SLO
    metric) or worse beyond doubt: goodput's where it decides; else the SLO metric's, where its whole
    interval lies on the side that goodput points to. None: undecided."""
    judged = gain(base, arm)
    if not judged.open:
        return judged
    witness = slo_change(base, arm, metric)
    if judged.change_pct is None or witness.open or witness.change_pct is None:
        return None
    return witness if (judged.change_pct > 0) == (witness.change_pct < 0) else None


def better(base: Arm, arm: Arm, metric: str) -> bool:
    """The lever raised what users buy beyond doubt: its goodput, or its SLO metric as second witness."""
    decided = decide(base, arm, metric)
    if decided is None or decided.change_pct is None:
        return False
    return decided.change_pct > 0 if decided.metric == JUDGED_ON else decided.change_pct < 0


def goodput_of(figures: dict) -> float | None:
    """request_goodput, with a run where no request met the SLO counted as half a request over its
    window (a continuity correction), so that its log, and the interval, are defined."""
    if "request_goodput" not in figures:
        return None
    duration = figures.get("duration") or 0.0
    floor = 0.5 / duration if duration > 0 else 0.0
    return max(float(figures["request_goodput"]), floor) or None


def measure(template: LocustRun, options: CapacityOptions, level: float, unit: str, target: str,
            folder: Path, metric: str, say) -> tuple[float | None, float | None]:
    """One run at the level, long enough for the SLO's percentile: the SLO's measured value and the
    run's goodput."""
    load = Load.at(level, unit, options.warmup + options.level_duration, warmup_seconds=options.warmup)
    locust = replace(template, results=folder / "results.json", load=load, stage_name="trial").stretched()
    needed, began = needed_requests(template.slo), time.time()

    def watch() -> str | None:
        partial = locust.figures(partial=True) or {}
        return ENOUGH if enough(partial, began, options.warmup + options.level_duration, needed) else None

    finished = locust.run(target, folder / "locust.log", say, watch=watch, watch_every=WATCH_SECONDS)
    if finished.code == INTERRUPTED:
        raise KeyboardInterrupt
    figures = locust.figures()
    if not figures:  # Locust itself failed (its metrics port taken, ...): the stack's part, not the server's
        said = [line for line in log_tail(folder / "locust.log").splitlines() if line.strip()]
        raise StackError(f"the load generator ended without results: {said[-1] if said else 'no output'}")
    value = next((s["measured"] for s in figures.get("slo", []) if s["name"] == metric), None)
    return value, goodput_of(figures)


def next_round(arms: list[Arm], done: int, repeats: int, run_seconds: float, share_left: float,
               metric: str) -> list[Arm]:
    """The arms the next round runs, in its order (forwards on odd rounds, backwards on even ones):
    every arm that started for the first `repeats` rounds; after them the current arm and the levers
    still undecided (and, where a lever already improves beyond doubt, pointing higher than it),
    while a round of them fits in the trial's share and EXTENSION times the rounds asked are not
    spent. None: the trial is over."""
    base, levers = arms[0], [arm for arm in arms[1:] if arm.refused is None]
    if not levers:
        return []
    if done < repeats:
        chosen = [base, *levers]
    else:
        # A lever already better beyond doubt ends the wait for the others, unless one of them
        # points higher still (it may yet beat it): the budget is the next step's.
        gains = {arm.name: gain(base, arm) for arm in levers}
        best = max((gains[arm.name].change_pct or -100.0 for arm in levers if better(base, arm, metric)), default=None)
        chosen = [base, *(arm for arm in levers if decide(base, arm, metric) is None and (
            best is None or (gains[arm.name].change_pct or -100.0) > best))]
        if len(chosen) == 1 or done >= EXTENSION * repeats or run_seconds * len(chosen) > share_left:
            return []
    return chosen if (done + 1) % 2 else chosen[::-1]


def run_trial(arms: list[Arm], server: Server, template: LocustRun, options: CapacityOptions, level: float,
              unit: str, metric: str, repeats: int, folder: Path, left: Callable[[], float],
              share: Callable[[], float], say) -> int:
    """Fill each arm's values, round by round; an arm that does not start is refused and not tried
    again. Returns the rounds run. BudgetSpent where the budget ends before one of the first `repeats`
    rounds' runs: the trial is then unfinished."""
    done, seconds = 0, list[float]()
    while order := next_round(arms, done, repeats, sum(seconds) / len(seconds) if seconds else 0.0, share(),
                              metric):
        done += 1
        which = f"of {repeats}" if done <= repeats else "(more, to decide)"
        for arm in order:
            if arm.refused is not None:
                continue
            if left() <= 0:
                if done > repeats:
                    return done - 1
                raise BudgetSpent
            where = folder / arm.name / f"r{done}"
            say(f"  round {done} {which}: {arm.name} at {level:g} {unit}")
            began = time.monotonic()
            try:
                value, goodput = _run_arm(arm, server, template, options, level, unit, metric, where, say)
            except StackError:
                raise  # twice: the stack's, not the arm's, and tune ends on it
            except (ComponentError, ServerError) as exc:
                arm.refused = why_refused(exc, where)
                say(f"  {arm.name} refused: {arm.refused}")
                continue
            seconds.append(time.monotonic() - began)
            if value is not None:
                arm.values.append(value)
            if goodput is not None:
                arm.goodput.append(goodput)
    return done


def _run_arm(arm: Arm, server: Server, template: LocustRun, options: CapacityOptions, level: float, unit: str,
             metric: str, where: Path, say) -> tuple[float | None, float | None]:
    """One run of an arm on a fresh start of its server. Where the stack's own parts fail (its sidecar,
    Prometheus, the load generator, a port another process took: StackError), the configuration is not to
    blame: the run starts once more, in a folder of its own, and a second such failure ends tune as
    an error. Only the server's own refusal (vLLM's, the restart's) is the arm's."""
    def once(folder: Path) -> tuple[float | None, float | None]:
        with server.serving(arm.config, folder, lambda message: None) as stack:
            return measure(on_stack(template, stack), options, level, unit, stack.servers.request_url, folder,
                           metric, say)

    try:
        return once(where)
    except StackError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__  # its log's tail is in the folder
        say(f"  {arm.name}: the stack failed ({first}); starting it again")
    return once(where.with_name(f"{where.name}-again"))
