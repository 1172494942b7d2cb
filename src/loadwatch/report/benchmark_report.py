"""A run as a Benchmark Report v0.2: the schema llm-d-benchmark and inference-perf share, so a team
that compares runs there can read ours (`loadwatch export RUN --format br0.2`).

The statistics come from the per-request records where the run kept them: every percentile the
schema names, exact. Without records, from the results: mean, standard deviation and the
percentiles loadwatch keeps (50, 90, 95, 99). What the report cannot know from a load generator
(the stack's accelerators and parallelism) is left out, as the schema allows; the target and model
go in the run's description.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import numpy as np
import yaml

from loadwatch.metrics.records import read_records
from loadwatch.metrics.results import Figures, Results

# The schema's percentile names and where each lies.
PERCENTILES = {"p0p1": 0.1, "p1": 1, "p5": 5, "p10": 10, "p25": 25, "p50": 50, "p75": 75, "p90": 90, "p95": 95,
               "p99": 99, "p99p9": 99.9}
# loadwatch's figure for each latency, in the schema's names.
LATENCIES = {"time_to_first_token": "ttft", "time_per_output_token": "tpot", "inter_token_latency": "itl",
             "request_latency": "e2el"}
RANDOM_DATASETS = ("random", "random-mm", "prefix-repetition")  # the schema's `source: random`; a file's is sampled


def _statistics(values: np.ndarray, units: str) -> dict | None:
    if values.size == 0:
        return None
    stats = {"units": units, "mean": float(values.mean()), "stddev": float(values.std()),
             "min": float(values.min()), "max": float(values.max())}
    return stats | {name: float(np.percentile(values, q)) for name, q in PERCENTILES.items()}


def _from_results(results: Figures, metric: str) -> dict | None:
    mean = results.latency(metric, "mean")
    if mean is None:
        return None
    stats = {"units": "ms", "mean": mean, "stddev": results.latency(metric, "std")} | \
        {f"p{q}": results.latency(metric, f"p{q}") for q in (50, 90, 95, 99)}
    return {k: v for k, v in stats.items() if v is not None}


def _columns(records: Path, replica: str | None = None) -> dict[str, np.ndarray]:
    """The measured successful requests' lengths and latencies (ms), from the records (those the
    replica served, where one is named)."""
    rows: dict[str, list[float]] = {name: [] for name in ("input", "output", "ttft", "tpot", "e2el", "ntpot", "itl")}
    for r in read_records(records):
        if r["stage"] == "warmup" or r["failure"] is not None or (replica is not None and r.get("replica") != replica):
            continue
        rows["input"].append(r["prompt_tokens"] if r["prompt_tokens"] is not None else math.nan)
        rows["output"].append(r["output_tokens"] if r["output_tokens"] is not None else math.nan)
        rows["e2el"].append(r["elapsed_s"] * 1000)
        for name, key in (("ttft", "ttft_s"), ("tpot", "tpot_s")):
            if r[key] is not None:
                rows[name].append(r[key] * 1000)
        if r["output_tokens"]:
            rows["ntpot"].append(r["elapsed_s"] * 1000 / r["output_tokens"])
        rows["itl"].extend(gap * 1000 for gap in r.get("itl_s") or ())
    return {name: (array := np.array(values, dtype=float))[~np.isnan(array)] for name, values in rows.items()}


def _duration(seconds: float) -> str:
    return f"PT{seconds:.3f}S"  # ISO 8601, as the schema's examples write it


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def benchmark_report(results: Results, records: Path | None, replica: str | None = None) -> dict:
    """The report of a run: its results, and its records where it kept them. With `replica`, of the
    requests that replica of a fleet served (a failure names no replica: its failures are the run's)."""
    options = results.options
    figures: Figures = results if replica is None else results.replicas[replica]
    columns = _columns(records, replica) if records is not None and records.exists() else None
    latency: dict[str, dict | None] = {}
    for name, metric in LATENCIES.items():
        exact = columns.get(metric) if columns is not None else None
        latency[name] = _statistics(exact, "ms") if exact is not None and exact.size else _from_results(figures, metric)
    if columns is not None:
        latency["normalized_time_per_output_token"] = _statistics(columns["ntpot"], "ms/token")
    # The schema has no refusal of its own: a request the server refused at admission did not succeed, so
    # it is among its failures (loadwatch's results keep it apart, in `rejected`).
    requests: dict = {"total": results.completed + results.failed + results.rejected,
                      "failures": results.failed + results.rejected,
                      "incomplete": results.cancelled + results.unknown_outcomes} if replica is None else \
        {"total": figures.completed}
    mean_input = figures.total_input_tokens / figures.completed if figures.completed else 0.0
    mean_output = figures.total_output_tokens / figures.completed if figures.completed else 0.0
    if columns is not None:
        requests["input_length"] = _statistics(columns["input"], "count")
        requests["output_length"] = _statistics(columns["output"], "count")
    else:
        requests["input_length"] = {"units": "count", "mean": mean_input}
        requests["output_length"] = {"units": "count", "mean": mean_output}
    throughput = {"input_token_rate": {"units": "tokens/s", "mean": figures.input_throughput},
                  "output_token_rate": {"units": "tokens/s", "mean": figures.output_throughput},
                  "total_token_rate": {"units": "tokens/s", "mean": figures.total_token_throughput},
                  "request_rate": {"units": "queries/s", "mean": figures.request_throughput}}
    dataset = str(options.get("dataset", ""))
    load: dict = {"tool": "loadwatch", "tool_version": version("loadwatch"),
                  "source": "random" if dataset in RANDOM_DATASETS else "sampled" if dataset else "unknown",
                  "input_seq_len": {"distribution": "other", "value": round(mean_input, 3)},
                  "output_seq_len": {"distribution": "other", "value": round(mean_output, 3)}}
    if options.get("request_rate"):
        load["rate_qps"] = options["request_rate"]
    served = f"requests served by replica {replica} of the fleet behind " if replica else ""
    report: dict = {
        "version": "0.2",
        "run": {"uid": results.run_id if replica is None else f"{results.run_id}-{replica}",
                "eid": results.run_id,  # a fleet's reports, the run's and each replica's, share it
                "time": {"start": _iso(results.started_at), "end": _iso(results.ended_at),
                         "duration": _duration(results.duration)},
                "description": f"loadwatch run: {served}{results.target or 'an unnamed target'}"
                               + (f", model {options['model']}" if options.get("model") else "")},
        "scenario": {"load": {"metadata": {"schema_version": "0.0.1", "description": f"dataset {dataset or 'unknown'}"},
                              "standardized": load,
                              "native": {"args": {k: v for k, v in options.items() if v is not None}}}},
        "results": {"request_performance": {"aggregate": {
            "requests": {k: v for k, v in requests.items() if v is not None},
            "latency": {k: v for k, v in latency.items() if v is not None}, "throughput": throughput}}},
    }
    if results.replicas and replica is None:
        report["results"]["component_health"] = [_fleet_health(results)]
    return report


def _fleet_health(results: Results) -> dict:
    """The replicas at the run's end: one lost and not back is unhealthy."""
    down = {lost["replica"] for lost in results.replicas_lost if lost.get("back_at") is None}
    return {"component_label": "replicas", "failed_replicas": len({lost["replica"] for lost in results.replicas_lost}),
            "replica_health": [{"replica_id": name, "healthy": name not in down} for name in results.replicas]}


def dump(report: dict) -> str:
    """YAML, as llm-d-benchmark writes its reports (JSON is YAML too, for a reader that wants it)."""
    return yaml.safe_dump(report, sort_keys=False)
