"""Each request's TTFT split by the engine's own account of it (records with `engine_*` fields):
exact percentiles of every part over the requests, where vLLM's histograms can only interpolate
inside buckets a second wide."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

# record field -> what the part is, in the order the time passes
PARTS = {
    "ttft_s": "client: whole TTFT",
    "headers_s": "client: to the response headers",
    "engine_queue_s": "engine: queued",
    "engine_prefill_s": "engine: scheduled to first token (prefill)",
    "ttft_rest_s": "the rest: to the engine and back, detokenising, streaming, network",
}


def ttft_split(records: Iterable[dict]) -> dict | None:
    """{"joined": n, "measured": m, "parts": [{part, name, mean_ms, median_ms, p99_ms}]} over the
    measured successful requests that carry the engine's account; None when none does."""
    values: dict[str, list[float]] = {part: [] for part in PARTS}
    measured = 0
    for r in records:
        if r["stage"] == "warmup" or r["failure"] is not None:
            continue
        measured += 1
        if r.get("ttft_rest_s") is None:
            continue
        for part in PARTS:
            values[part].append(r[part] * 1000)
    joined = len(values["ttft_s"])
    if not joined:
        return None
    parts = []
    for part, name in PARTS.items():
        ms = np.array(values[part])
        parts.append({"part": part, "name": name, "mean_ms": float(ms.mean()), "median_ms": float(np.median(ms)),
                      "p99_ms": float(np.percentile(ms, 99))})
    return {"joined": joined, "measured": measured, "parts": parts}
