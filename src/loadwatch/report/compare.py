"""A/B tables of results files, as the seeds' experiments show them: figures per run, then % change."""

from __future__ import annotations

from pathlib import Path

from loadwatch.metrics.results import Results, latency_key
from loadwatch.report.build import ReportError
from loadwatch.report.markdown import table

COLUMNS = [
    ("req/s", "request_throughput"),
    ("output tok/s", "output_throughput"),
    *((f"{stat} {metric.upper()} (ms)", latency_key(metric, stat))
      for metric in ("ttft", "tpot", "e2el") for stat in ("mean", "median", "p99")),
]


def run_name(spec: str) -> tuple[str, Path]:
    """`NAME=PATH`, or a path named by its run folder (for results.json) or its file name."""
    name, sep, path = spec.partition("=")
    if sep and name and not Path(spec).exists():
        return name, Path(path)
    given = Path(spec)
    return (given.parent.name if given.stem == "results" and given.parent.name else given.stem), given


def _value(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def change(base: float | None, value: float | None) -> str:
    if base is None or value is None or base == 0:
        return "n/a"
    return f"{(value - base) / base * 100:+.2f}%"


def compare(runs: list[tuple[str, Results]]) -> str:
    if len(runs) < 2:
        raise ReportError("compare needs at least two results files")
    header = ["run", *(label for label, _ in COLUMNS)]
    figures = table(header, [[name, *(_value(r.field(key)) for _, key in COLUMNS)] for name, r in runs])
    base_name, base = runs[0]
    changes = table(header, [[name, *(change(base.field(key), r.field(key)) for _, key in COLUMNS)]
                             for name, r in runs[1:]])
    return "\n".join([
        "## Results", "", *figures, "",
        f"## Change against {base_name}", "",
        "Throughput: higher is better; latency: lower is better.", "", *changes, "",
    ])
