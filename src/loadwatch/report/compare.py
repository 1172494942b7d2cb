"""A/B tables of runs, as the seeds' experiments show them (figures per configuration, then each
one's change against the baseline), with an interval (95 % by default) and a verdict for every change.

A side of the comparison is one run or the repeats of one configuration; its figure is the mean
over its runs. With two runs a side or more the runs are the observations (`metrics.repeats`);
otherwise the interval is a block bootstrap over the per-request records (`metrics.bootstrap`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from loadwatch.metrics import bootstrap
from loadwatch.metrics.records import request_latencies
from loadwatch.metrics.repeats import MIN_RUNS, change_over_runs
from loadwatch.metrics.results import Results, latency_key
from loadwatch.report.build import ReportError, read_exact, results_path
from loadwatch.report.exact import records_of
from loadwatch.report.markdown import table
from loadwatch.report.peers import DEFINITIONS, NotAPeer, read_peer

# Input tok/s is what an embeddings or rerank run is measured by (it has no output tokens).
THROUGHPUTS = [("req/s", "request_throughput"), ("output tok/s", "output_throughput"),
               ("input tok/s", "input_throughput")]
LATENCIES = [(f"{stat} {metric.upper()} (ms)", metric, stat)
             for metric in ("ttft", "tpot", "e2el") for stat in ("mean", "median", "p99")]
COLUMNS = [*THROUGHPUTS, *((label, latency_key(metric, stat)) for label, metric, stat in LATENCIES)]
METHODS = {
    "requests": "bootstrap over blocks of consecutive requests: a side with one run holds no run-to-run noise",
    "runs": "Welch's t over the logs of the runs' figures, each run one observation; the change is the ratio of "
            "the sides' geometric means, so it never passes -100 %",
}
EXPLANATION = ("The verdict is `same` when the interval spans 0. With one run a side the interval covers only "
               "the noise within the runs: runs of one configuration can differ by more than that, so repeat "
               f"each one (base=A1,A2,A3) before trusting a small change; with {MIN_RUNS} runs a side or more, the "
               f"runs are the observations. Throughput has one value a run: with fewer than {MIN_RUNS} runs a side "
               "it gets no interval and no verdict.")


@dataclass
class Run:
    results: Results
    latencies: dict[str, np.ndarray] | None  # ms per request, where the run kept its records
    tool: str = "loadwatch"  # who measured it: loadwatch, or a peer whose result file it is (report/peers.py)


@dataclass
class Side:
    name: str
    runs: list[Run]

    def figure(self, key: str) -> float | None:
        values = [run.results.field(key) for run in self.runs]
        return None if any(v is None for v in values) else float(np.mean(values))


@dataclass
class Row:
    label: str
    key: str
    base: float | None
    value: float | None
    change: bootstrap.Change
    method: str | None


def side_spec(spec: str) -> tuple[str, list[Path]]:
    """`NAME=PATH[,PATH...]`, or paths named after the first one's run folder or file name."""
    name, sep, rest = spec.partition("=")
    if not (sep and name and not Path(spec).exists()):
        name, rest = "", spec
    paths = [Path(p) for p in rest.split(",") if p]
    if not paths:
        raise ReportError(f"{spec!r} names no run")
    if not name:
        first = results_path(paths[0])
        name = first.parent.name if first.stem == "results" and first.parent.name else first.stem
    return name, paths


def load_run(path: Path) -> Run:
    path = results_path(path)
    try:
        results, count = read_exact(path)
    except ReportError as exc:
        try:
            tool, results, latencies = read_peer(path)
        except NotAPeer:
            raise exc from None
        return Run(results, latencies, tool)
    if count is None:
        return Run(results, None)
    try:
        return Run(results, request_latencies(records_of(path, results)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"cannot read the per-request records of {path}: {exc}") from None


def load_side(spec: str) -> Side:
    name, paths = side_spec(spec)
    return Side(name, [load_run(p) for p in paths])


def _latency_row(label: str, metric: str, stat: str, base: Side, other: Side, rng: np.random.Generator,
                 confidence: float) -> Row:
    key = latency_key(metric, stat)
    b, v = base.figure(key), other.figure(key)
    if len(base.runs) >= MIN_RUNS and len(other.runs) >= MIN_RUNS:
        return _run_level_row(label, key, base, other, False, confidence)
    runs = base.runs + other.runs
    if all(r.latencies is not None and len(r.latencies[metric]) > 0 for r in runs):
        base_res, other_res = (bootstrap.group_resamples([r.latencies[metric] for r in side.runs if r.latencies],
                                                         stat, rng) for side in (base, other))
        change = bootstrap.change(b, v, base_res, other_res, higher_is_better=False, confidence=confidence)
        return Row(label, key, b, v, change, "requests")
    return Row(label, key, b, v, bootstrap.change(b, v, None, None, False), None)


def _run_level_row(label: str, key: str, base: Side, other: Side, higher_is_better: bool,
                   confidence: float) -> Row:
    b, v = base.figure(key), other.figure(key)
    if b is None or v is None or len(base.runs) < MIN_RUNS or len(other.runs) < MIN_RUNS:
        return Row(label, key, b, v, bootstrap.change(b, v, None, None, higher_is_better), None)
    change = change_over_runs([r.results.field(key) for r in base.runs], [r.results.field(key) for r in other.runs],
                              higher_is_better, confidence)
    return Row(label, key, b, v, change, "runs")


def rows(base: Side, other: Side, seed: int = 0, confidence: float = bootstrap.CONFIDENCE) -> list[Row]:
    """Every figure's change; the same seed gives the same intervals."""
    rng = np.random.default_rng(seed)
    return [*(_run_level_row(label, key, base, other, True, confidence) for label, key in THROUGHPUTS),
            *(_latency_row(label, metric, stat, base, other, rng, confidence) for label, metric, stat in LATENCIES)]


def _value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.2f}%"


def _interval(change: bootstrap.Change) -> str:
    if change.ci_low is None or change.ci_high is None:
        return "n/a"
    return f"[{change.ci_low:+.2f}%, {change.ci_high:+.2f}%]"


def compare(sides: list[Side], confidence: float = bootstrap.CONFIDENCE) -> tuple[str, list[dict]]:
    """The Markdown tables and the rows of `--json`."""
    if len(sides) < 2:
        raise ReportError("compare needs at least two runs (or groups of repeats) to compare")
    base = sides[0]
    header = ["run", *(label for label, _ in COLUMNS)]
    figures = table(header, [[f"{side.name} ({len(side.runs)} runs)" if len(side.runs) > 1 else side.name,
                              *(_value(side.figure(key)) for _, key in COLUMNS)] for side in sides])
    lines = ["## Results", "", *(["Each figure of a group of runs is the mean over its runs.", ""]
                                 if any(len(s.runs) > 1 for s in sides) else []), *figures, ""]
    out_rows: list[dict] = []
    for side in sides[1:]:
        compared = rows(base, side, confidence=confidence)
        methods = sorted({r.method for r in compared if r.method})
        lines += [f"## {side.name} against {base.name}", "",
                  "Throughput: higher is better; latency: lower is better. Intervals: "
                  + ("; ".join(f"{m} ({METHODS[m]})" for m in methods) if methods else "none (no per-request "
                     "records and fewer than two runs a side)") + ".", "",
                  *table(["metric", base.name, side.name, "change", f"{confidence:.0%} interval", "verdict"],
                         [[r.label, _value(r.base), _value(r.value), _pct(r.change.change_pct),
                           _interval(r.change), r.change.verdict or "n/a"] for r in compared]), ""]
        out_rows += [{"run": side.name, "base": base.name, "metric": r.key, "change_pct": r.change.change_pct,
                      "ci_low": r.change.ci_low, "ci_high": r.change.ci_high, "verdict": r.change.verdict,
                      "method": r.method} for r in compared]
    lines += [EXPLANATION, ""]
    tools = sorted({run.tool for side in sides for run in side.runs})
    if tools != ["loadwatch"]:
        lines += ["## How each tool measures", "",
                  "The figures share their names, not always their definitions: a change between tools is partly "
                  "a change of definition.", "", *(f"- **{tool}**: {DEFINITIONS[tool]}" for tool in tools), ""]
    return "\n".join(lines), out_rows
