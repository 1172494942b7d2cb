"""`loadwatch capacity`: the stack up (the embedded engine unless --target), levels of load until
the knee is found, the verdict and its evidence in the run folder, the stack down."""

from __future__ import annotations

import math
import shlex
import time
from dataclasses import replace
from pathlib import Path

from loadwatch.capacity import autoscale, output
from loadwatch.capacity.diagnose import FULL_BATCH, GREW, ReplicaState, diagnose, refused
from loadwatch.capacity.interval import judge, knee_interval, rerun_interval
from loadwatch.capacity.levels import Level, level_records, run_level
from loadwatch.capacity.options import CapacityOptions
from loadwatch.capacity.probe import probe
from loadwatch.capacity.room import Batch
from loadwatch.capacity.search import Search
from loadwatch.client.stream import SENT_HEADERS
from loadwatch.defaults import Part
from loadwatch.engine.flags import given_max_num_seqs, max_num_seqs
from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.scale import ScaleError
from loadwatch.loadrun.locust import INTERRUPTED, MAX_STRETCH, Load, LocustRun
from loadwatch.loadrun.stack import new_run_dir, on_stack, running
from loadwatch.metrics.capacity import Capacity, NextStep, Scaling
from loadwatch.metrics.records import read_records
from loadwatch.metrics.slo import SLO
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.engine import engine_figures, server_peaks
from loadwatch.report.fleet import prefix_affinity
from loadwatch.report.routing import reasons, router_figures
from loadwatch.settings import LoadSettings, records_beside
from loadwatch.stack.stack import scaler_of
from loadwatch.workloads.datasets import SharedPrefix, dataset_named
from loadwatch.workloads.errors import DatasetError

MIN_REQUESTS = 20
NO_KNEE = 1  # nothing held, or the search could not locate the knee
ONE_REPLICA = "replicas-1"  # --scaling: the folder of the search on one replica
START_MARGIN = 1.25  # a first rate this much above the one that just completes the requests needed in time


def needed_requests(slos: list[SLO]) -> int:
    """Requests a level must complete for its tightest percentile to mean something: 5 beyond it."""
    needed = MIN_REQUESTS
    for slo in slos:
        if slo.is_ratio or slo.stat == "mean":
            continue
        q = 0.5 if slo.stat == "median" else float(slo.stat[1:]) / 100
        needed = max(needed, math.ceil(round(5 / (1 - q), 6)))  # 5 / 0.1 is 50.000000000000004
    return needed


def first_level(options: CapacityOptions, needed: int) -> float:
    """--start, else 2 users, or the rate that completes the requests a level needs well within its
    longest stretch: a p99 needs 500, which 1 req/s cannot complete in 8 x 15 s."""
    if options.start is not None:
        return options.start
    if options.mode == "users":
        return 2.0
    return max(1.0, float(f"{START_MARGIN * needed / (MAX_STRETCH * options.level_duration):.3g}"))


def rule(options: CapacityOptions, needed: int) -> str:
    return (f"{options.level_duration:g} s of load, longer (up to {MAX_STRETCH}x) until {needed} requests have "
            f"completed, 5 beyond its tightest percentile SLO (a level that cannot complete them is not held, "
            f"and says so); after {options.warmup:g} s of warm-up left out of its figures; stopped early once "
            f"clearly lost (an SLO over twice its limit after 20 requests, the engine's queue only growing, or "
            f"the load generator saturated); {options.cool_down:g} s between levels.")


def capacity(options: CapacityOptions, template: LocustRun, target: str | None, vllm_args: list[str], out: Path,
             say, fleet: FleetOptions | None = None, scaling: bool = False) -> int:
    """`template`: the Locust run every level makes, but for its load and files. `fleet`: replicas
    behind a router (started here, or the user's own behind `target`); `scaling`: a search on one of
    them first, then on all."""
    run_dir = new_run_dir(out)
    with running(run_dir, target, vllm_args, say, fleet=fleet) as stack:
        try:
            template = on_stack(template, stack)
            known = batch_of(options, target, vllm_args)
            api = PrometheusAPI(stack.url(Part.PROMETHEUS))
            one = None
            if scaling and stack.servers.fleet:
                scaler = scaler_of(stack, say)
                count = scaler.most or len(scaler.serving())
                scaler.scale_to(1, say)
                say(f"capacity: one replica first, in {run_dir / ONE_REPLICA}")
                one = search(options, template, api, stack.servers.request_url, run_dir / ONE_REPLICA, say, known,
                             serving=scaler.serving_names())
                scaler.scale_to(count, say)
                say(f"capacity: then the fleet's {count} replicas")
                if options.start is None and one.max_sustainable:  # the fleet holds what one replica held
                    options = options.model_copy(update={"start": one.max_sustainable})
            result = search(options, template, api, stack.servers.request_url, run_dir, say, known, one_replica=one,
                            then=lambda found: next_steps(options, template, target, vllm_args, fleet, run_dir,
                                                          found))
            return 0 if result.max_sustainable is not None and not result.undecided else NO_KNEE
        except ScaleError as exc:
            say(f"error: the fleet could not be scaled: {exc}")
            return NO_KNEE
        except KeyboardInterrupt:
            say("interrupted: no conclusion; the levels run so far are in " + str(run_dir / "levels"))
            return INTERRUPTED


def level_run(options: CapacityOptions, template: LocustRun, level: Level, results: Path) -> LocustRun:
    """The level's Locust run: long enough to stretch; the watch ends it once it has enough."""
    load = Load.at(level.value, level.unit, options.warmup + options.level_duration, warmup_seconds=options.warmup)
    return replace(template, results=results, load=load, stage_name=level.name).stretched()


def batch_of(options: CapacityOptions, target: str | None, vllm_args: list[str]) -> Batch | None:
    """--max-num-seqs as the user gave it, as the server's flags set it (the embedded engine's, or a
    target's that tune restarts with them), or the embedded engine's default; None for a target
    that was not told it (vLLM does not export it: it is inferred from the levels, if it can be)."""
    if options.max_num_seqs is not None:
        return Batch(options.max_num_seqs, "given with --max-num-seqs")
    if (given := given_max_num_seqs(vllm_args)) is not None:
        return Batch(given, "the server's flags")
    if target is None:
        return Batch(max_num_seqs(vllm_args), "vLLM's default on the CPU")
    return None


def inferred_batch(levels: list[Level]) -> Batch | None:
    """The running batch's limit where it shows: the same peak of running requests at two levels
    or more, the higher with requests waiting. A guess, and said to be one."""
    peaks = [(lv.engine.get("requests_running_peak"), lv.engine.get("requests_waiting_peak") or 0)
             for lv in sorted(levels, key=lambda lv: lv.value)]
    running = [p for p, _ in peaks if p is not None]
    if not running:
        return None
    top = max(running)
    at_top = [(p, waiting) for p, waiting in peaks if p == top]
    if top < 1 or len(at_top) < 2 or at_top[-1][1] < 1:
        return None
    return Batch(int(top), f"inferred: the running batch held at {top:.0f} over {len(at_top)} levels while "
                           "requests waited; give --max-num-seqs to be sure")


def shared_prefix(results: dict) -> SharedPrefix | None:
    """What the level's prompts share, from the workload options its results record."""
    options = results.get("options") or {}
    try:
        dataset = dataset_named(options.get("dataset", "builtin"))
    except DatasetError:
        return None
    return dataset.shared_prefix(LoadSettings.model_construct(**{k: v for k, v in options.items()
                                                                  if k in LoadSettings.model_fields}))


def search(options: CapacityOptions, template: LocustRun, api: PrometheusAPI, target: str, run_dir: Path,
           say, batch: Batch | None = None, serving: list[str] | None = None, one_replica: Capacity | None = None,
           then=None) -> Capacity:
    """Levels of load against a stack that is up, until the knee is found; the conclusion, also
    written to run_dir. Ctrl-C stops the level running and is raised again. `serving`: the embedded
    fleet's replicas its router sends to, where it does not send to all; `one_replica`: the search on
    one replica that came before this one, for the scaling; `then`: the commands that go on from the
    result, for its report."""
    needed = needed_requests(template.slo)
    if output.decode_unbounded(template.slo):
        say("capacity: warning: the SLOs bound TTFT only; decode is free to grow, and the knee moves with whatever "
            "keeps TTFT under its limit (add a tpot or e2el SLO for a knee users feel)")
    engine_alone = probe(template, target, run_dir, say)
    search = Search(first_level(options, needed), integer=options.mode == "users", precision=options.precision)
    levels: list[Level] = []
    deadline = time.monotonic() + options.max_duration
    undecided = None
    while (value := search.next()) is not None:
        if time.monotonic() > deadline:
            undecided = (f"--max-duration ({options.max_duration:g} s) was reached after {len(levels)} levels, "
                         f"before the next level ({value:g} {options.unit}) could narrow it down")
            break
        level = Level(len(levels) + 1, value, options.unit, f"level-{len(levels) + 1:02d}")
        say(f"{level.name}: {value:g} {options.unit} for {options.level_duration:g} s or until {needed} requests "
            f"complete (up to {MAX_STRETCH * options.level_duration:g} s)")
        results = run_dir / "levels" / f"{level.name}.json"
        results.parent.mkdir(parents=True, exist_ok=True)
        run_level(level, level_run(options, template, level, results), target, api, options.warmup,
                  options.level_duration, needed, results.with_suffix(".log"), say)
        time.sleep(options.cool_down)
        try:
            level.engine = engine_figures(api, level.start, level.end, settle=options.cool_down)
            replicas, ranks = server_peaks(api, level.start, level.end)
            level.replicas = {name: peaks for name, peaks in replicas.items() if serving is None or name in serving}
            level.ranks = {name: each for name, each in ranks.items() if serving is None or name in serving}
        except PrometheusError as exc:
            say(f"warning: no engine figures for {level.name}: {exc}")
        records = level_records(records_beside(results))
        level.attribute(records, api)
        if not level.problem:
            # Refusals no SLO allows break a level beyond doubt: each one is counted, not sampled.
            level.sure, level.slo_intervals = judge(records, template.slo, level.passed, level.stopped_early
                                                    or ("refused" if refused(level.results) else None))
        levels.append(level)
        if level.too_few and level.under_slos and _more_than_before(level, levels[:-1]):
            # More load completes more requests: the knee lies higher.
            search.too_few(value)
            say(f"{level.name}: {level.problem}; under its SLOs on what it completed, so the search goes higher")
            continue
        if level.problem:  # neither held nor broke: a knee placed past it would be a guess
            undecided = f"{level.name} ({value:g} {options.unit}) could not be judged: {level.problem}"
            break
        search.record(value, level.passed)
        verdict = level.verdict
        doubt = ", within its SLO's noise (in doubt)" if level.sure == "in doubt" else ""
        say(f"{level.name}: {verdict}{doubt}, {level.results.get('request_throughput', 0):.2f} req/s")
    best = search.best
    if undecided is None and search.unjudged and (best is None or max(search.unjudged) > best):
        undecided = (f"the knee lies between {max(search.unjudged):g} {options.unit}, which completed too few "
                     f"requests to judge, and {min(search.broke):g} {options.unit}, which broke; a longer "
                     "--level-duration would judge it" if search.broke else
                     "no level completed enough requests to judge; a longer --level-duration would do")
    decisive = _decisive(levels, best)
    figures = decisive.results if decisive else {}
    diagnosis = diagnose(figures, decisive.engine if decisive else {}, figures.get("saturated", {}),
                         batch or inferred_batch(levels), shared_prefix(figures), _below(levels, decisive),
                         replica_states(levels, decisive, batch), affinity_at(decisive, run_dir),
                         _full_served(levels, decisive), routing_at(api, decisive, say),
                         rank_states(decisive, batch or inferred_batch(levels)))
    if diagnosis.limit == "admission":  # how the refusals grew with the load
        diagnosis.evidence["rejections_per_level"] = [
            {"level": lv.value, "rejected": lv.results.get("rejected") or 0,
             "rejected_ratio": lv.results.get("rejected_ratio") or 0.0} for lv in levels if lv.results]
    count = len(decisive.replicas) if decisive and decisive.replicas else 1
    scaling = scaling_of(one_replica, best, count)
    if diagnosis.limit == "replicas" and best and decisive:
        diagnosis.evidence["replicas_needed"] = replicas_for(decisive.value, best, count, scaling)
    result = output.conclusion(options.mode, options.unit, levels, best, diagnosis, options.headroom,
                               rule(options, needed), undecided, decisive, template.slo)
    result.scaling = scaling
    result.probe = engine_alone
    interval = knee_interval([(lv.value, lv.sure) for lv in levels])
    result.max_sustainable_interval = list(interval)
    result.rerun_interval = list(rerun_interval(interval, options.unit)) if engine_alone else None
    held = next((lv for lv in levels if lv.passed and lv.value == best), None)
    found = autoscale.rule(api, diagnosis.limit, diagnosis.evidence, held, decisive if decisive is not held else None,
                           sorted(decisive.replicas) if decisive and len(decisive.replicas) > 1 else (serving or []),
                           count) if undecided is None else None
    result.autoscaling = found
    result.next = [NextStep.model_validate(step) for step in then(result)] if then else []
    if found:
        most = max(2 * count, diagnosis.evidence.get("replicas_needed") or 0)
        autoscale.write(run_dir, found, most)
    output.write(run_dir, result, api)
    if undecided:
        say(f"capacity: the knee was not located: {undecided}"
            + (f"; {best:g} {options.unit} held" if best is not None else ""))
    else:
        say(f"capacity: {best:g} {options.unit} sustained{output.refusing_words(result)}"
            f"{output.interval_words(result)}, "
            f"{result.recommended:g} {options.unit} recommended; limit: {diagnosis.explanation}"
            if best is not None else "capacity: no level held its SLOs")
    for item in diagnosis.missed:
        say(f"capacity: missed: {item['explanation']}")
    say(f"written: {run_dir}/report.html (and capacity.json, report.md, {output.PLOT})")
    return result


def next_steps(options: CapacityOptions, template: LocustRun, target: str | None, vllm_args: list[str],
               fleet: FleetOptions | None, run_dir: Path, result: Capacity) -> list[dict]:
    """The commands that go on from a search: tune, with this search's options, to relieve the limit
    it named; explain, on the requests of the level that broke."""
    steps = []
    if result.limit and result.max_sustainable is not None:
        words = ["loadwatch", "tune", *(f"--slo={slo}" for slo in template.slo)]
        for name, value in options.model_dump(exclude_defaults=True).items():
            words += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
        if target:
            words += ["--target", target, "--restart", "YOUR-RESTART-COMMAND {vllm_args}"]
        words += [f"--vllm-arg={arg}" for arg in vllm_args]
        for name, value in (fleet.given() if fleet else {}).items():
            for item in value if isinstance(value, list) else [value]:
                words += [f"--{name.replace('_', '-')}", f"{item:g}" if isinstance(item, float) else str(item)]
        if template.options:
            words += ["--", *template.options]
        steps.append({"why": f"relieve the limit ({result.limit}): tune tries the flags that do, in rounds, "
                             "and keeps what beats the current configuration beyond doubt"
                             + (" (--restart: your command that restarts the server with the flags in place of "
                                "{vllm_args})" if target else ""),
                      "command": shlex.join(words)})
    if result.decisive_level:
        level = run_dir / "levels" / f"{result.decisive_level}.json"
        steps.append({"why": f"see why the slowest requests of {result.decisive_level} (the level the limit was "
                             "read at) were slow, each in the engine's own account",
                      "command": shlex.join(["loadwatch", "explain", str(level), "--slowest", "5"])})
    return steps


def scaling_of(one: Capacity | None, best: float | None, count: int) -> Scaling | None:
    """Capacity against replicas, from the search on one replica (in ONE_REPLICA) and this one on
    `count`: the scaling efficiency is the fleet's capacity over `count` times one replica's."""
    if one is None:
        return None
    alone = one.max_sustainable
    efficiency = best / (count * alone) if best and alone else None
    return Scaling(capacity={"1": alone, str(count): best}, replicas=count, efficiency=efficiency,
                   one_replica_limit=one.limit, one_replica_folder=ONE_REPLICA)


def replicas_for(load: float, best: float, count: int, scaling: Scaling | None) -> int:
    """Replicas for `load` (the level that broke): in proportion to `count` replicas' capacity
    `best`; with a measured scaling, along the line from one replica's capacity to the fleet's
    (each replica past the first adds what each one added here)."""
    alone = scaling.alone if scaling else None
    if not alone or count < 2 or best <= alone:
        return math.ceil(count * load / best)
    added = (best - alone) / (count - 1)
    return max(count, 1 + math.ceil((load - alone) / added))


def affinity_at(level: Level | None, run_dir: Path) -> dict | None:
    """Where a fleet sent each shared prefix's requests at the level, from its records."""
    records = records_beside(run_dir / "levels" / f"{level.name}.json") if level else None
    if records is None or not records.exists():
        return None
    try:
        return prefix_affinity(read_records(records))
    except (OSError, ValueError):
        return None


def routing_at(api: PrometheusAPI, level: Level | None, say) -> dict | None:
    """Why a fleet's router kept no prefix on one replica at the level, from its counters (None
    outside a fleet, or where they say nothing)."""
    if level is None or len(level.replicas) < 2:
        return None
    try:
        return reasons(router_figures(api, level.start, level.end), SENT_HEADERS)
    except PrometheusError as exc:
        say(f"warning: no router figures for {level.name}: {exc}")
        return None


def replica_states(levels: list[Level], decisive: Level | None, batch: Batch | None) -> dict[str, ReplicaState]:
    """A fleet's replicas at the decisive level: each one's peaks, and its batch: the one given for all,
    unless its own levels show a smaller one (a replica given flags of its own: --replica-arg)."""
    if decisive is None:
        return {}
    states = {}
    for name, peaks in decisive.replicas.items():
        own = inferred_batch([replace(lv, engine=lv.replicas.get(name, {})) for lv in levels])
        smaller = own is not None and (batch is None or own.max_num_seqs < batch.max_num_seqs)
        states[name] = ReplicaState(peaks, own if smaller else batch)
    return states


def rank_states(decisive: Level | None, batch: Batch | None) -> dict[str, dict[str, ReplicaState]]:
    """The data-parallel ranks at the decisive level, by server and rank: each one's peaks, and the
    batch, which vLLM's --max-num-seqs sets per rank."""
    if decisive is None:
        return {}
    return {server: {rank: ReplicaState(peaks, batch) for rank, peaks in ranks.items()}
            for server, ranks in decisive.ranks.items()}


def _more_than_before(level: Level, before: list[Level]) -> bool:
    """Whether a level too short to judge completed more than the one before it that was: where more
    load completes no more requests, going higher cannot help."""
    completed = level.results.get("completed", 0)
    earlier = [lv.results.get("completed", 0) for lv in before if lv.too_few]
    return completed > 0 and (not earlier or completed > earlier[-1])


def _below(levels: list[Level], decisive: Level | None) -> tuple[dict, dict] | None:
    """The results and engine figures of a level run below the decisive one, if any: the highest whose
    running batch was clearly smaller (by GREW), so that a batch that grew without serving more shows;
    else the highest. A search narrows the knee down to levels whose batches are all full: the level
    just below then tells nothing of what a bigger batch served."""
    lower = [lv for lv in levels if decisive and lv.value < decisive.value and lv.results and lv.engine]
    running = decisive.engine.get("requests_running_peak") if decisive else None
    smaller = [lv for lv in lower if running and (lv.engine.get("requests_running_peak") or 0) * GREW <= running]
    top = max(smaller or lower, key=lambda lv: lv.value, default=None)
    return (top.results, top.engine) if top else None


def _full_served(levels: list[Level], decisive: Level | None) -> float | None:
    """The most output throughput served by a level at or below the decisive one whose running batch
    was as big as the decisive one's (within FULL_BATCH): what the full batch serves."""
    running = decisive.engine.get("requests_running_peak") if decisive and decisive.engine else None
    if not running or decisive is None:
        return None
    served = [lv.results.get("output_throughput") for lv in levels if lv.value <= decisive.value and lv.results
              and lv.engine and (lv.engine.get("requests_running_peak") or 0) >= FULL_BATCH * running]
    return max((v for v in served if v), default=None)


def _decisive(levels: list[Level], best: float | None) -> Level | None:
    """The level whose figures show the limit: the lowest that broke above the best, else the highest run."""
    broke = [lv for lv in levels if not lv.passed and not lv.too_few and (best is None or lv.value > best)]
    if broke:
        return min(broke, key=lambda lv: lv.value)
    return max(levels, key=lambda lv: lv.value, default=None)
