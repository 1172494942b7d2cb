"""The run report: results JSON + Prometheus -> report.json, report.md and a plot, in the run's folder."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from loadwatch.atomic import write_atomically
from loadwatch.metrics.records import read_records
from loadwatch.metrics.results import KEPT_AT_LEAST, SHORT_OF_SCHEDULE, Results, latency_key
from loadwatch.metrics.samples import DISTRIBUTIONS
from loadwatch.metrics.turns import by_turn
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.attribution import attribution, exact_engine_ttft
from loadwatch.report.engine import SETTLE_SECONDS, engine_figures, rejections_compared
from loadwatch.report.exact import records_of, with_exact_figures
from loadwatch.report.fleet import fleet_figures
from loadwatch.report.html import write_run_page
from loadwatch.report.markdown import render
from loadwatch.report.plots import plot_latency_against_engine, plotted_latency, series
from loadwatch.report.scaling import scaling_figures

log = logging.getLogger(__name__)
PLOT = "ttft-kv-waiting.png"
CLIENT_KEYS = (
    "completed", "failed", "rejected", "rejected_ratio", "rejections", "cancelled", "duration", "request_throughput",
    "request_goodput", "output_throughput",
    "total_token_throughput", "failure_ratio", "failures", "total_tool_calls", "total_reasoning_tokens",
    "cached_prompt_tokens_ratio", "price_per_hour", "cost_per_million_output_tokens", "cost_per_million_total_tokens",
    *(latency_key(metric, stat) for metric in DISTRIBUTIONS for stat in ("mean", "median", "p99")),
)
STAGE_KEYS = ("name", "level", "unit", "completed", "failed", "rejected", "request_throughput", "output_throughput",
              latency_key("ttft", "median"), latency_key("ttft", "p99"), latency_key("tpot", "median"))
# A traffic split's models (LoRA adapters): what each one's requests waited and took per token.
MODEL_KEYS = ("completed", "failed", "rejected", "output_throughput",
              *(latency_key(metric, stat) for metric in ("ttft", "tpot") for stat in ("median", "p99")))


class ReportError(Exception):
    """The results file is missing or unreadable; the message says which."""


def results_path(path: Path) -> Path:
    """A run folder's results file, or the file named."""
    return path / "results.json" if path.is_dir() else path


def read_results(path: Path) -> Results:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return Results.model_validate_json(text)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise ReportError(f"{path} is not a results JSON: {exc.errors()[0]['msg']}") from None
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors()[:3])
        raise ReportError(f"{path} is not a loadwatch results file (or one from before reports): {problems}") from None


def read_exact(path: Path) -> tuple[Results, int | None]:
    """The results, their figures recomputed from the per-request records beside them if any."""
    try:
        return with_exact_figures(path, read_results(path))
    except ValueError as exc:
        raise ReportError(str(exc)) from None


def build_report(results_path: Path, api: PrometheusAPI | None, out_dir: Path, rate_window: str = "30s",
                 settle: float = SETTLE_SECONDS) -> dict:
    results, records = read_exact(results_path)
    start, end = results.started_at, results.ended_at
    notes: list[str] = []
    for lost in results.lost_workers:  # first: the figures below lack these requests
        heard = (datetime.fromtimestamp(lost["last_heard"], UTC).strftime("%H:%M:%S UTC") if lost.get("last_heard")
                 else "never")
        notes.append(f"Incomplete: worker {lost['worker']} on host {lost['host']} was lost (last heard {heard}); "
                     f"{lost['unknown']} requests' outcomes unknown ({lost['unknown_counted_as']}), counted "
                     "neither as successes nor as failures.")
    for process, why in sorted(results.saturated.items()):
        notes.append(f"The load generator was a bottleneck: Locust process {process} was saturated ({why}); "
                     "its latencies include its own delays. Run more processes (--processes N).")
    if results.arrivals is not None and results.arrivals.fell_short:
        notes.append(f"The open loop's sends kept under {KEPT_AT_LEAST:.0%} of its schedule's pace: "
                     f"{SHORT_OF_SCHEDULE}. Run more processes (--processes N).")
    source = (f"exact, from the {records} records of {records_of(results_path, results).name}" if records is not None
              else "from the run's sketches (percentiles within 0.5 %)")
    engine: dict = {}
    plot = plot_latency = None
    missing = None  # why the engine's side is missing, in one sentence
    if api is None:
        missing = ("The engine's side is missing: this run has no Prometheus data (a run without the stack, or "
                   "Locust alone), so only the client's figures are shown.")
    else:
        try:
            engine = engine_figures(api, start, end, settle)
            data = series(api, start, end, rate_window)
            if any(data.values()):
                plot = plot_latency_against_engine(data, results.stages, start, end, out_dir / PLOT).name
                plot_latency = plotted_latency(data)
            if all(v is None for v in engine.values()):
                engine = {}
                missing = ("The engine's side is missing: Prometheus has no engine series for this run's window "
                           "(the target exposes no vLLM /metrics the sidecar could read).")
        except PrometheusError as exc:
            missing = f"The engine's side is missing: {exc}."
    client = {key: results.field(key) for key in CLIENT_KEYS}
    # Where the two counts agree the comparison is a figure of the report; where they do not, a note too.
    compared = rejections_compared(results.rejected, results.rejections, engine.get("admission_rejections"))
    if compared and not compared[1]:
        notes.append(compared[0])
    # Read once for the turns, the attribution and the page (the exact figures were read with the results).
    rows = list(read_records(records_of(results_path, results))) if records is not None else None
    turns = by_turn(rows) if rows is not None else []
    split = attribution(rows, api, start, end) if rows is not None else None
    exact_engine_ttft(engine, split)
    if engine.get("gpu_energy_joules") is not None and results.total_output_tokens:
        engine["energy_per_output_token_joules"] = engine["gpu_energy_joules"] / results.total_output_tokens
    mean_ttft = results.latency("ttft", "mean")
    if engine.get("engine_mean_ttft_ms") is not None and mean_ttft is not None:
        engine["ttft_outside_engine_ms"] = mean_ttft - engine["engine_mean_ttft_ms"]
    report = {
        "run_id": results.run_id,
        "target": results.target,
        "results_file": str(results_path),  # as `loadwatch explain` takes it
        "window": {"start": start, "end": end,
                   "start_utc": datetime.fromtimestamp(start, UTC).isoformat(timespec="seconds"),
                   "end_utc": datetime.fromtimestamp(end, UTC).isoformat(timespec="seconds")},
        "client": client,
        "client_source": source,
        # How the load generator itself fared: each process's share of a core, an open loop's schedule.
        "load_generator": {"busy": results.busy,
                           "arrivals": results.arrivals.model_dump() if results.arrivals else None},
        "engine": engine,
        "engine_missing": missing,
        "stages": [{k: s.field(k) for k in STAGE_KEYS} for s in results.stages],
        "models": [{"model": name, **{k: f.field(k) for k in MODEL_KEYS}} for name, f in results.models.items()],
        "fleet": fleet_figures(results, None if missing else api, start, end),
        # A fleet whose replica count changed during the run (--scale-at): each change and its recovery.
        "scaling": scaling_figures(results_path.parent, rows, results.objectives(), end),
        "turns": turns,
        "ttft_split": split,
        "slo": results.slo,
        "plot": plot,
        "plot_latency": plot_latency,  # TTFT, or E2E for a run that streamed nothing
        "notes": notes,
        "rejections": compared[0] if compared else None,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    report["html"] = write_run_page(report, results, rows, api, out_dir).name
    write_atomically(out_dir / "report.json", json.dumps(report, indent=2) + "\n")
    write_atomically(out_dir / "report.md", render(report))
    return report
