"""The end of a run on the master or local runner: the results JSON, the summary block, the verdict."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from loadwatch.atomic import write_atomically
from loadwatch.loadgen.faults import run_faults
from loadwatch.loadgen.process import Process
from loadwatch.loadgen.replica_watch import outage_figures
from loadwatch.metrics.cost import per_million_tokens
from loadwatch.metrics.results import Results
from loadwatch.metrics.slo import Verdict
from loadwatch.metrics.summary import format_block, replica_figures, summarize
from loadwatch.settings import LoadSettings

log = logging.getLogger(__name__)
VERSION = version("loadwatch")  # of the load generator, in every results file and checkpoint
SLO_EXIT_CODE = 3
BAD_INPUT_EXIT_CODE = 2  # docs/reference/exit-codes-and-ports.md: as argparse exits on a malformed command line
INCOMPLETE_EXIT_CODE = 1  # a worker was lost: requests went out whose outcomes nobody knows


def write_results(path: Path, result: dict, summary: str) -> None:
    """The results JSON and, beside it with .txt, the printed summary block."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(result, indent=2) + "\n")
        write_atomically(path.with_suffix(".txt"), summary + "\n")
    except OSError as exc:
        log.error("Cannot write results to %s: %s; the summary below is all there is", path, exc)
    else:
        log.info("Results written to %s", path)


def _results(process: Process, partial: bool = False) -> tuple[Results, list[Verdict]]:
    state, settings = process.state, process.settings
    figures, verdicts = summarize(state.recorder.samples, settings.slo, state.stages(), settings.request_rate)
    if settings.replica:
        recorder = state.recorder
        served = process.replicas.listed({key[0] for key in recorder.by_replica.by_key})
        figures |= replica_figures(recorder.by_replica, served, figures["duration"])
        figures["unattributed"] = figures["completed"] - recorder.by_replica.total().completed
        watch = process.replica_watch
        figures["replicas_lost"] = [outage_figures(o, recorder.outcomes, state.stopped_at or time.time())
                                    for o in (watch.outages if watch else []) if o.lost_at >= state.started_at]
        if settings.results_json is not None:  # `loadwatch run` notes its faults beside the results
            figures["faults"] = run_faults(settings.results_json.parent, recorder.outcomes,
                                           watch.router if watch else [], state.stopped_at or time.time())
    ended_at = state.stopped_at or time.time()
    price = settings.price_per_hour * settings.gpus if settings.price_per_hour is not None else None
    result = Results.model_validate({
        "run_id": state.run_id, "target": state.target, "users": state.users,
        "loadwatch_version": VERSION, **figures,
        # Wall clock, warm-up included: the window a report reads from Prometheus.
        "started_at": state.started_at, "ended_at": ended_at,
        "warmup_requests": state.recorder.warmup_finished, "partial": partial,
        "saturated": dict(state.recorder.saturated), "busy": state.recorder.busy(ended_at - state.started_at),
        "output_tokens_counted_by": dict(state.recorder.tokens_from), "options": settings.public_options(),
        "streams_without_done": state.recorder.without_done, "trace_entries_skipped": state.recorder.skipped,
        "lost_workers": state.workers.lost, "unknown_outcomes": state.workers.unknown(),
        "clock_offsets": state.clocks.as_results(), "price_per_hour": price,
        "cost_per_million_output_tokens": per_million_tokens(price, figures["output_throughput"]),
        "cost_per_million_total_tokens": per_million_tokens(price, figures["total_token_throughput"]),
        "records": records_reference(settings.results_json, settings.requests_path)})
    return result, verdicts


def records_reference(results: Path | None, records: Path | None) -> str | None:
    """Where the per-request records are, as the results file names them: relative to its folder
    when they lie under it (the run folder moves as a whole), else absolute."""
    if records is None:
        return None
    if results is not None and records.resolve().is_relative_to(results.resolve().parent):
        return str(records.resolve().relative_to(results.resolve().parent))
    return str(records.resolve())


def checkpoint(process: Process) -> None:
    """The results so far, marked partial, beside where the final ones will go."""
    path = process.settings.checkpoint_path
    if path is None:
        return
    result, _verdicts = _results(process, partial=True)
    try:
        write_atomically(path, json.dumps(result.model_dump(mode="json"), indent=2) + "\n")
    except OSError as exc:
        log.warning("Cannot write the checkpoint %s: %s", path, exc.strerror)


def finish(process: Process) -> int | None:
    """Summarise the run, write its results and keep the summary to print; the exit code the SLO
    verdicts call for, None without SLOs."""
    settings = process.settings
    result, verdicts = _results(process)
    process.summary = format_block(result, verdicts)
    if settings.results_json:
        write_results(settings.results_json, result.model_dump(mode="json"), process.summary)
        if settings.checkpoint_path is not None:
            settings.checkpoint_path.unlink(missing_ok=True)  # the final results replace it
    if not verdicts:
        return None
    return 0 if all(v.passed for v in verdicts) else SLO_EXIT_CODE


def make_page(settings: LoadSettings) -> None:
    """A run from the web UI gets its report.html beside its results, for the downloads: `loadwatch
    report` in a process of its own, so that the UI stays responsive while Bokeh draws (a second or
    two), and client-only (Locust alone has no Prometheus), as the page says."""
    if settings.results_json is not None:
        subprocess.Popen([sys.executable, "-m", "loadwatch.cli", "report", str(settings.results_json)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def print_summary(process: Process, exit_code: int) -> None:
    # Printed after Locust's own tables, so the figures people compare come last.
    if process.summary:
        print(process.summary, flush=True)
        if exit_code == SLO_EXIT_CODE:
            print(f"SLO broken: exit code {SLO_EXIT_CODE}", flush=True)
        if process.state.workers.lost:
            print(f"Incomplete: {process.state.workers.unknown()} requests' outcomes unknown: worker lost "
                  f"(exit code {INCOMPLETE_EXIT_CODE})", flush=True)
