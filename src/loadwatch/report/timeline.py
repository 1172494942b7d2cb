"""A run's series over time, for its pages: client figures per window from the per-request
records, the engine's and the load's gauges from Prometheus, and the requests to draw one by one."""

from __future__ import annotations

import math

import numpy as np

from loadwatch.catalogue import Client, Engine, Router, total
from loadwatch.metrics.ttft_split import NAMES, cause, measured, medians
from loadwatch.prometheus import PrometheusAPI

BINS = 200  # windows over the run, at least a second each

MAX_POINTS = 20_000  # requests drawn in the scatter; beyond, the slowest 1 % and a uniform sample of the rest
ENGINE_SERIES = {  # name -> (PromQL, scale, chart)
    "running": (f"sum({Engine.REQUESTS_RUNNING})", 1, "queue"),
    "waiting": (f"sum({Engine.REQUESTS_WAITING})", 1, "queue"),
    "waiting for capacity": (f'sum({Engine.REQUESTS_WAITING_BY_REASON}{{reason="capacity"}})', 1, "queue"),
    "waiting, deferred": (f'sum({Engine.REQUESTS_WAITING_BY_REASON}{{reason="deferred"}})', 1, "queue"),
    "KV cache usage (%)": (f"max({Engine.KV_CACHE_USAGE})", 100, "kv"),
    "KV cache peak (%)": (f"max({Engine.KV_CACHE_USAGE_MAX})", 100, "kv"),
    "prefix-cache hits (%)": (f"max({Engine.PREFIX_CACHE_HIT_RATIO})", 100, "ratios"),
    "prompt tokens from cache (%)": (
        f'sum(rate({total(Engine.PROMPT_TOKENS_BY_SOURCE)}{{source!="local_compute"}}[30s])) / '
        f"sum(rate({total(Engine.PROMPT_TOKENS_BY_SOURCE)}[30s]))", 100, "ratios"),
    "spec-decode acceptance (%)": (f"max({Engine.SPEC_ACCEPTANCE_RATIO})", 100, "ratios"),
}
CLIENT_SERIES = {"users": f"sum({Client.USERS})", "in flight": f"sum({Client.IN_FLIGHT})",
                 # A fleet's: as its router counts them (--scale-at changes it during the run).
                 "replicas serving": f"max({Router.REPLICAS_ACTIVE})"}


def _groups(times: np.ndarray, edges: np.ndarray) -> list[np.ndarray]:
    """The indices of `times` in each window between consecutive `edges`."""
    index = np.searchsorted(edges, times, side="right") - 1
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(len(edges)))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def client_over_time(records: list[dict], start: float, end: float) -> dict:
    """Per window of the run, over the requests that finished in it: TTFT, TPOT and ITL p50 and p99
    (ms), output tokens/s, and failures/s by reason. Windows without a request are gaps, not zeros."""
    seconds = max(1.0, math.ceil((end - start) / BINS))
    edges = np.arange(start, end + 2 * seconds, seconds)
    done = measured(records)
    groups = _groups(np.array([r["start"] + r["elapsed_s"] for r in done]), edges)
    out: dict = {"t": list(edges[:-1] * 1000), "seconds": seconds}
    for metric, field in (("TTFT", "ttft_s"), ("TPOT", "tpot_s")):
        values = np.array([np.nan if r.get(field) is None else r[field] * 1000 for r in done])
        for q in (50, 99):
            out[f"{metric} p{q}"] = [_quantile(values[g], q) for g in groups]
    if any(r.get("itl_s") for r in done):
        gaps = [np.array([gap * 1000 for i in g for gap in done[i].get("itl_s") or ()]) for g in groups]
        for q in (50, 99):
            out[f"ITL p{q}"] = [_quantile(v, q) for v in gaps]
    tokens = np.array([r.get("output_tokens") or 0 for r in done])
    out["output tok/s"] = [float(tokens[g].sum()) / seconds for g in groups]
    failed = [r for r in records if r["stage"] != "warmup" and r["failure"] is not None]
    out["failures"] = {}
    for reason in sorted({r["failure"] for r in failed}):
        at = np.array([r["start"] + r["elapsed_s"] for r in failed if r["failure"] == reason])
        out["failures"][reason] = [len(g) / seconds for g in _groups(at, edges)]
    return out


def _quantile(values: np.ndarray, q: float) -> float:
    values = values[~np.isnan(values)] if len(values) else values
    return float(np.percentile(values, q)) if len(values) else float("nan")


def scatter_points(records: list[dict]) -> tuple[dict, str]:
    """TTFT against send time, each point with its id and the part of its TTFT furthest above the
    median; a large run keeps its slowest 1 % and a uniform sample of the rest, and says so."""
    done = measured(records)
    typical = medians(done)
    shown, note = done, f"all {len(done):,} measured requests"
    if len(done) > MAX_POINTS:
        ordered = sorted(done, key=lambda r: r["ttft_s"], reverse=True)
        slowest = ordered[:max(1, len(done) // 100)]
        rest = ordered[len(slowest):]
        step = len(rest) / (MAX_POINTS - len(slowest))
        shown = slowest + [rest[int(i * step)] for i in range(MAX_POINTS - len(slowest))]
        note = (f"{len(shown):,} of {len(done):,} measured requests: all of the slowest 1 % and a uniform sample of "
                "the rest")
    causes = [cause(r, typical, ttft_only=True) for r in shown]
    return {"t": [r["start"] * 1000 for r in shown], "ttft": [r["ttft_s"] * 1000 for r in shown],
            "e2e": [r["elapsed_s"] * 1000 for r in shown], "id": [r["id"] for r in shown],
            "scenario": [r["scenario"] for r in shown],
            "cause": [f"{NAMES[p]}: {s * 1000:.1f} ms (median {m * 1000:.1f} ms)" for p, s, m in causes]}, note


def engine_over_time(api: PrometheusAPI, start: float, end: float) -> dict[str, tuple[list, list]]:
    """The engine's and the load's gauges over the run, from Prometheus: name -> (ms times, values)."""
    step = max(1.0, (end - start) / BINS)
    out = {}
    queries = {**{name: (expr, scale) for name, (expr, scale, _chart) in ENGINE_SERIES.items()},
               **{name: (expr, 1) for name, expr in CLIENT_SERIES.items()}}
    for name, (expr, scale) in queries.items():
        result = api.query_range(expr, start, end, step)
        points = [(float(t) * 1000, float(v) * scale) for t, v in result[0]["values"] if v != "NaN"] if result else []
        out[name] = ([t for t, _ in points], [v for _, v in points])
    return out
