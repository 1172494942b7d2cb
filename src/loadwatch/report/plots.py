"""The report's plot: client TTFT p99 over time, above the engine's KV cache usage and queue. A run
that streamed nothing (embeddings, rerank) has no TTFT: its E2E p99 takes the top panel."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import matplotlib.dates as mdates
from matplotlib.figure import Figure

from loadwatch.catalogue import Client, Engine
from loadwatch.metrics.results import Stage
from loadwatch.prometheus import PrometheusAPI

SERIES = {
    "ttft_p99": f"histogram_quantile(0.99, sum by (le) (rate({Client.TTFT}_bucket[{{window}}])))",
    "e2e_p99": f"histogram_quantile(0.99, sum by (le) (rate({Client.E2E}_bucket[{{window}}])))",
    "kv_usage": f"max({Engine.KV_CACHE_USAGE})",
    "kv_usage_peak": f"max({Engine.KV_CACHE_USAGE_MAX})",
    "waiting": f"sum({Engine.REQUESTS_WAITING})",
}


def series(api: PrometheusAPI, start: float, end: float, rate_window: str) -> dict[str, list[tuple[float, float]]]:
    step = max(1.0, (end - start) / 300)
    out = {}
    for name, expr in SERIES.items():
        result = api.query_range(expr.format(window=rate_window), start, end, step)
        out[name] = [(float(t), float(v)) for t, v in result[0]["values"] if v != "NaN"] if result else []
    return out


def _times(points: list[tuple[float, float]]) -> list[datetime]:
    return [datetime.fromtimestamp(t, UTC) for t, _ in points]


def plotted_latency(data: dict) -> str:
    """The latency the top panel shows: TTFT, or E2E where no request had a first token."""
    return "TTFT" if data["ttft_p99"] or not data["e2e_p99"] else "E2E"


def plot_latency_against_engine(data: dict, stages: list[Stage], start: float, end: float, path: Path) -> Path:
    # A Figure of its own, not pyplot's: no global state and no display backend to choose.
    fig = Figure(figsize=(10, 6))
    top, bottom = fig.subplots(2, 1, sharex=True)
    latency = plotted_latency(data)
    points = data[f"{latency.lower()}_p99"]
    top.plot(_times(points), [v * 1000 for _, v in points], color="tab:blue")
    top.set_ylabel(f"client {latency} p99 (ms)\nfrom the histogram")
    top.set_title(f"Client {latency} p99 against the engine's KV cache and queue")
    bottom.plot(_times(data["kv_usage"]), [v * 100 for _, v in data["kv_usage"]], color="tab:orange",
                label="KV cache usage")
    bottom.plot(_times(data["kv_usage_peak"]), [v * 100 for _, v in data["kv_usage_peak"]], color="tab:orange",
                linestyle=":", label="KV cache usage, window peak")
    bottom.set_ylabel("KV cache usage (%)")
    peak = max((v * 100 for _, v in data["kv_usage_peak"] + data["kv_usage"]), default=0.0)
    bottom.set_ylim(0, min(105.0, max(5.0, peak * 1.2)))  # a nearly empty cache still shows its shape
    waiting = bottom.twinx()
    waiting.step(_times(data["waiting"]), [v for _, v in data["waiting"]], color="tab:red", where="post",
                 label="requests waiting")
    waiting.set_ylabel("requests waiting")
    waiting.set_ylim(bottom=0)
    lines = bottom.get_legend_handles_labels()[0] + waiting.get_legend_handles_labels()[0]
    bottom.legend(lines, [line.get_label() for line in lines], loc="upper left", fontsize="small")
    for stage in stages:
        for axis in (top, bottom):
            axis.axvline(datetime.fromtimestamp(stage.start, UTC), color="grey", linestyle="--", linewidth=0.8)
        top.annotate(stage.name, (datetime.fromtimestamp(stage.start, UTC), 1),
                     xycoords=("data", "axes fraction"),
                     xytext=(3, -12), textcoords="offset points", fontsize="small", color="grey")
    bottom.set_xlim(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
    bottom.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    bottom.set_xlabel("time (UTC)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
