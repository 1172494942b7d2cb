"""The run report: results JSON + Prometheus -> report.json, report.md and a plot, in the run's folder."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.engine import engine_figures
from loadwatch.report.markdown import render
from loadwatch.report.plots import plot_ttft_against_engine, series

log = logging.getLogger(__name__)
PLOT = "ttft-kv-waiting.png"
CLIENT_KEYS = (
    "completed", "failed", "duration", "request_throughput", "request_goodput", "output_throughput",
    "total_token_throughput", "failure_ratio", "failures",
    *(f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p99")),
)


class ReportError(Exception):
    """The results file is missing or unreadable; the message says which."""


def read_results(path: Path) -> dict:
    try:
        results = json.loads(path.read_text())
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ReportError(f"{path} is not a results JSON: {exc}") from None
    for key in ("run_id", "completed", "started_at", "ended_at"):
        if key not in results:
            raise ReportError(f"{path} has no {key!r}: not a loadwatch results file (or one from before reports)")
    return results


def build_report(results_path: Path, api: PrometheusAPI | None, out_dir: Path, rate_window: str = "30s") -> dict:
    results = read_results(results_path)
    start, end = results["started_at"], results["ended_at"]
    notes: list[str] = []
    engine: dict = {}
    plot = None
    if api is None:
        notes.append("No Prometheus to read: engine-side figures and the plot are missing.")
    else:
        try:
            engine = engine_figures(api, start, end)
            data = series(api, start, end, rate_window)
            if any(data.values()):
                plot = plot_ttft_against_engine(data, results.get("stages", []), start, end, out_dir / PLOT).name
            else:
                notes.append("Prometheus has no series of this run's window: no plot.")
        except PrometheusError as exc:
            notes.append(f"Engine-side figures and the plot are missing: {exc}")
    client = {key: results.get(key) for key in CLIENT_KEYS}
    if engine.get("engine_mean_ttft_ms") is not None and client["mean_ttft_ms"] is not None:
        engine["ttft_outside_engine_ms"] = client["mean_ttft_ms"] - engine["engine_mean_ttft_ms"]
    report = {
        "run_id": results["run_id"],
        "target": results.get("target"),
        "window": {"start": start, "end": end,
                   "start_utc": datetime.fromtimestamp(start, UTC).isoformat(timespec="seconds"),
                   "end_utc": datetime.fromtimestamp(end, UTC).isoformat(timespec="seconds")},
        "client": client,
        "engine": engine,
        "stages": [{k: s.get(k) for k in ("name", "level", "unit", "completed", "failed", "request_throughput",
                                           "output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms")}
                   for s in results.get("stages", [])],
        "slo": results.get("slo", []),
        "plot": plot,
        "notes": notes,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "report.md").write_text(render(report))
    return report
