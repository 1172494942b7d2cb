"""`loadwatch explain`: why a request was slow, offline from a finished run's folder.

Its record gives the timeline and, where vLLM sent its own account, the engine's split of it; the
run's Prometheus data (read back as `loadwatch report` does) gives the engine's state while it ran;
the run's other requests give what is typical. The cause named is the part of the request furthest
above its median over the run.
"""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from loadwatch.client.stream import SENT_HEADERS
from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.records import read_records
from loadwatch.metrics.ttft_split import NAMES, cause, measured, medians, parts_of
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.build import ReportError, read_results, results_path
from loadwatch.report.engine_at import EngineState, EngineTimeline
from loadwatch.report.exact import records_of
from loadwatch.report.routing import reasons, router_figures
from loadwatch.stack.readback import DATA, data_of, prometheus_on

BAD_INPUT = 2  # docs/reference/exit-codes-and-ports.md: the run, its records or the request named cannot be found


class ExplainError(Exception):
    """The run, its records or the request cannot be found; the message says which."""


def runs_in(folder: Path) -> Path:
    """The results file of a run folder; of a capacity search's, its decisive level (the one its
    diagnosis read); of an experiment's, its one cell. Where that is not one run, the runs it holds
    are listed in the error, for the user to name one."""
    if not folder.is_dir() or (folder / "results.json").is_file():
        return results_path(folder)
    if (folder / "capacity.json").is_file():
        try:
            decisive = Capacity.read(folder / "capacity.json").decisive_level
        except (OSError, ValueError) as exc:
            raise ExplainError(f"cannot read {folder / 'capacity.json'}: {exc}") from None
        level = folder / "levels" / f"{decisive}.json"
        if decisive and level.is_file():
            return level
        return _choose(folder, sorted((folder / "levels").glob("level-*[0-9].json")), "a capacity search's levels")
    if (folder / "summary.json").is_file():
        cells = sorted(p for p in folder.rglob("results.json") if "warmup" not in p.parts)
        if len(cells) == 1:
            return cells[0]
        return _choose(folder, cells, "an experiment's cells")
    return results_path(folder)


def _choose(folder: Path, runs: list[Path], what: str) -> Path:
    if not runs:
        raise ExplainError(f"{folder} holds {what}, but none of them has results")
    raise ExplainError(f"{folder} holds {what}, not one run; name one:\n"
                       + "\n".join(f"  loadwatch explain {run}" for run in runs))


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:,.1f} ms"


def find_records(run: Path) -> tuple[list[dict], Path, tuple[float, float]]:
    """The run's records, their file, and the run's window."""
    path = runs_in(run)
    try:
        results = read_results(path)
    except ReportError as exc:
        raise ExplainError(str(exc)) from None
    records = records_of(path, results)
    if not records.is_file():
        raise ExplainError(f"{records} is missing: explain reads the per-request records a run writes beside its "
                           "results (loadwatch run, capacity and experiment always do; plain Locust with "
                           "--results-json)")
    try:
        return list(read_records(records)), records, (results.started_at, results.ended_at)
    except ValueError as exc:
        raise ExplainError(str(exc)) from None


def pick(records: list[dict], candidates: list[dict], request_id: str | None, slowest: int, field: str) -> list[dict]:
    """The request named (an id or a unique start of one), else the `slowest` `candidates` by `field`."""
    if request_id:
        found = [r for r in records if r["id"].startswith(request_id)]
        if len(found) != 1:
            raise ExplainError(f"{'no' if not found else len(found)} requests of the run have an id starting "
                               f"{request_id!r}" + ("; give more of it" if found else ""))
        return found
    return sorted(candidates, key=lambda r: r[field], reverse=True)[:slowest]


def answered_whole(records: list[dict]) -> list[dict]:
    """The successful requests of the load that came as one answer (embeddings, rerank): they have
    no first token, so no parts to split, only their E2E."""
    return [r for r in records if r["stage"] != "warmup" and r["failure"] is None and r.get("ttft_s") is None]


def whole_story(record: dict, median_e2e: float, state: EngineState | None) -> list[str]:
    """An answer that came whole: when it came, the engine's state then, and how far from typical."""
    lines = [f"  {'+' + _ms(record['elapsed_s']):>12}  answered whole (no stream, so no first token to split at)"]
    engine = f", while the engine had {state.words()}" if state is not None else ""
    if state is not None:
        lines.append(f"  engine while it ran: {state.words()}")
    if record["elapsed_s"] - median_e2e <= 0.05 * record["elapsed_s"]:
        return [*lines, "  why: nothing stands out; its E2E is within a few percent of the run's median request."]
    return [*lines, f"  why: the answer took {_ms(record['elapsed_s'])} against the run's median of "
                    f"{_ms(median_e2e)}{engine}."]


def story(record: dict, typical: dict[str, float], state: EngineState | None, ttft_only: bool) -> list[str]:
    """The request's timeline, the engine's state then, and the sentence naming its cause."""
    sent = datetime.fromtimestamp(record["start"], UTC).strftime("%H:%M:%S.%f")[:-3]
    lines = [f"request {record['id']} ({record['scenario']}, model {record['model']}, stage {record['stage']}, "
             f"worker {record['worker']}), sent {sent} UTC"]
    if record["failure"] is not None:
        return [*lines, f"  failed after {_ms(record['elapsed_s'])}: {record['failure']}"]
    prompt = f" ({record['prompt_tokens']:,} prompt tokens)" if record.get("prompt_tokens") is not None else ""
    lines += [f"  {'+0.0 ms':>12}  sent{prompt}"]
    if record.get("headers_s") is not None:
        lines.append(f"  {'+' + _ms(record['headers_s']):>12}  response headers")
    if record.get("ttft_s") is None:
        return [*lines, *whole_story(record, typical["e2e_s"], state)]
    parts = parts_of(record)
    if "engine_queue_s" in parts:
        lines.append(f"  {'':>12}  the engine's account: queued {_ms(parts['engine_queue_s'])}, then scheduled to "
                     f"first token (prefill) {_ms(parts['engine_prefill_s'])}")
        rest = f" (the rest, outside the engine's account: {_ms(parts['ttft_rest_s'])})"
    else:
        rest = " (no account from the engine: vLLM 0.32 sends one with --enable-per-request-metrics)"
    lines.append(f"  {'+' + _ms(record['ttft_s']):>12}  first token{rest}")
    tokens = f"{record['output_tokens']:,} tokens" if record.get("output_tokens") is not None else "last token"
    tpot = f", TPOT {_ms(record['tpot_s'])}" if record.get("tpot_s") is not None else ""
    itl = f" (engine: mean ITL {_ms(record['engine_mean_itl_s'])})" if record.get("engine_mean_itl_s") else ""
    spec = (f"; speculative decoding accepted {record['spec_acceptance_length']:.2f} tokens a step"
            if record.get("spec_acceptance_length") else "")
    lines.append(f"  {'+' + _ms(record['elapsed_s']):>12}  last token: {tokens}{tpot}{itl}{spec}")
    if state is not None:
        lines.append(f"  engine while it ran: {state.words()}")
    lines.append("  " + why(record, typical, state, ttft_only))
    return lines


def why(record: dict, typical: dict[str, float], state: EngineState | None, ttft_only: bool) -> str:
    part, seconds, median = cause(record, typical, ttft_only)
    total, what = (record["ttft_s"], "TTFT") if ttft_only else (record["elapsed_s"], "E2E")
    excess = seconds - median
    if excess <= 0.05 * total:
        return "why: nothing stands out; each part is within a few percent of the run's median request."
    text = f"why: {NAMES[part]}: {_ms(seconds)} against the run's median of {_ms(median)} (its {what}: {_ms(total)})"
    if state is not None and part in ("engine_queue_s", "decode_s", "engine_prefill_s"):
        text += f", while the engine had {state.words()}"
    if part in ("headers_s", "ttft_rest_s", "after_headers_s"):
        text += ("; outside the engine's scheduling: the API server (parsing, chat template, tokenizing, "
                 "detokenizing), the network, or this load generator (its event-loop lag is in the run's report)")
    return text + "."


def router_story(api: PrometheusAPI, start: float, end: float, records: list[dict]) -> list[str]:
    """A fleet's router over the run, where its counters say why it kept no prefix on one replica:
    the prefix-aware decisions it made by load, or a hash without its key. A per-request key is told
    only where the prompts share prefixes (elsewhere nothing is lost by it)."""
    found = reasons(router_figures(api, start, end), SENT_HEADERS)
    shared = any(r.get("prefix") is not None for r in records)
    if found is None or (found["routing_reason"] == "per_request_key" and not shared):
        return []
    counts = found.get("prefix_decisions") or found.get("replica_requests") or {}
    return ["", f"router: it kept no prefix on one replica: {found['why']}; reason {found['routing_reason']} ("
                + ", ".join(f"{k} {v}" for k, v in counts.items()) + ")"]


def explain(run: Path, request_id: str | None, slowest: int, by: str, say, show=print) -> int:
    """The stories go to `show` (stdout, plain: they are the command's output); notes to `say`."""
    records, path, (start, end) = find_records(run)
    streamed = measured(records)
    whole = [] if streamed else answered_whole(records)
    field = "ttft_s" if by == "ttft" and streamed else "elapsed_s"
    chosen = pick(records, streamed or whole, request_id, slowest, field)
    if not chosen:
        raise ExplainError(f"{path} holds no measured request")
    typical = medians(streamed) if streamed else {"e2e_s": float(np.median([r["elapsed_s"] for r in whole]))}
    data = data_of(path)
    # A fleet's records name their replica: each replica's state is read apart, to tell the one that
    # served a request from the others at that moment.
    replicas = sorted({r["replica"] for r in records if r.get("replica")})
    with ExitStack() as stack:
        timeline = None
        fleet: dict[str, EngineTimeline] = {}
        if data is None:
            say(f"note: no {DATA} in or above {run}: the engine's state is left out")
        else:
            try:
                api: PrometheusAPI = stack.enter_context(prometheus_on(data, data.parent / "logs"))
                timeline = EngineTimeline(api, start, end)
                fleet = {name: EngineTimeline(api, start, end, name) for name in replicas}
            except PrometheusError as exc:
                say(f"note: the engine's state is left out: {exc}")
        if whole:
            show(f"{len(whole)} requests answered whole (embeddings or rerank) in {path}: no first token, so each "
                 f"is told by its E2E; their median {_ms(typical['e2e_s'])}")
        else:
            show(f"{len(streamed)} measured requests in {path}; medians over them: " + ", ".join(
                f"{NAMES[p].split(' (')[0]} {_ms(s)}" for p, s in typical.items()))
        for record in chosen:
            window = (record["start"], record["start"] + record["elapsed_s"])
            served_by = fleet.get(record.get("replica") or "")
            state = (served_by or timeline).around(*window) if timeline else None
            show("")
            for line in story(record, typical, state, ttft_only=request_id is None and by == "ttft"):
                show(line)
            others = [name for name in replicas if name != record.get("replica")]
            if record.get("replica"):
                meanwhile = "; ".join(f"replica {name}: {fleet[name].around(*window).words()}"
                                      for name in others if name in fleet)
                show(f"  served by replica {record['replica']} (its state above)"
                     + (f"; the others meanwhile: {meanwhile}" if meanwhile else ""))
        if fleet:
            try:
                for line in router_story(api, start, end, records):
                    show(line)
            except PrometheusError as exc:
                say(f"note: the router's reasons are left out: {exc}")
    return 0


def explain_command(args: argparse.Namespace, say) -> int:
    try:
        return explain(args.run, args.request_id, args.slowest, args.by, say)
    except ExplainError as exc:
        say(f"error: {exc}")
        return BAD_INPUT
