"""Exact tail attribution of a run (or a capacity level): its requests split by the engine's own
account, the median and slowest 1 % bands each with the engine's state while they ran, and the
engine's TTFT from those accounts instead of vLLM's coarse buckets."""

from __future__ import annotations

from collections.abc import Iterable

from loadwatch.metrics.ttft_split import ttft_split
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.engine_at import EngineState, EngineTimeline


def attribution(records: Iterable[dict], api: PrometheusAPI | None, start: float, end: float) -> dict | None:
    """ttft_split's figures, each band with `engine`: the mean over its requests of the peaks seen
    while each ran (running, waiting, KV cache, preemptions); None without the engine's accounts."""
    split = ttft_split(records)
    if split is None:
        return None
    timeline = None
    if api is not None:
        try:
            timeline = EngineTimeline(api, start, end)
        except PrometheusError:
            timeline = None
    for band in split["bands"]:
        windows = band.pop("windows")
        if timeline is not None:
            states = [timeline.around(s, e) for s, e in windows]
            band["engine"] = {name: _mean([getattr(state, name) for state in states])
                              for name in EngineState.__dataclass_fields__}
    return split


def exact_engine_ttft(engine: dict, split: dict | None) -> None:
    """Where requests carry the engine's account, its TTFT and the TTFT's parts (queued, prefill)
    come from them, all over the same requests, not from vLLM's buckets over others."""
    if split is None or not engine:
        return
    engine.update({f"engine_{stat}_ttft_ms": split[f"engine_{stat}_ttft_ms"] for stat in ("mean", "median", "p99")})
    parts = {p["part"]: p for p in split["parts"]}
    for name, part in (("queue", "engine_queue_s"), ("prefill", "engine_prefill_s")):
        engine.update({f"engine_{stat}_{name}_ms": parts[part][f"{stat}_ms"] for stat in ("mean", "median", "p99")})
    engine["engine_ttft_exact"] = True


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
