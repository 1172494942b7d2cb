"""Each request's time split into parts by the engine's own account of it (records with `engine_*`
fields): exact percentiles of every part over the requests, where vLLM's histograms can only
interpolate inside buckets a second wide; the parts of the median and of the slowest requests;
and the part that made one request slow."""

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
# The parts that add up to a request's E2E: with the engine's account, and without it.
JOINED = ("headers_s", "engine_queue_s", "engine_prefill_s", "ttft_rest_s", "decode_s")
CLIENT_ONLY = ("headers_s", "after_headers_s", "decode_s")
TTFT_PARTS = {"headers_s", "engine_queue_s", "engine_prefill_s", "ttft_rest_s", "after_headers_s"}
NAMES = {
    "headers_s": "reaching the server (to the response headers)",
    "engine_queue_s": "waiting in the engine's queue",
    "engine_prefill_s": "the prefill (scheduled to first token)",
    "ttft_rest_s": "outside the engine's account (to the engine and back, detokenising, streaming, network)",
    "after_headers_s": "the wait from the response headers to the first token",
    "decode_s": "decoding (first token to last)",
}
# (name, lowest and highest TTFT percentile): the median request, and the slowest 1 %.
BANDS = (("median", 45.0, 55.0), ("p99", 99.0, 100.0))


def measured(records: Iterable[dict]) -> list[dict]:
    """The successful requests of the load, warm-up left out."""
    return [r for r in records if r["stage"] != "warmup" and r["failure"] is None and r.get("ttft_s") is not None]


def parts_of(record: dict) -> dict[str, float]:
    """Seconds of each part of one successful request: the engine's split where its record has it."""
    headers = record.get("headers_s") or 0.0
    decode = record["elapsed_s"] - record["ttft_s"]
    if record.get("ttft_rest_s") is not None:
        return {"headers_s": headers, "engine_queue_s": record["engine_queue_s"],
                "engine_prefill_s": record["engine_prefill_s"], "ttft_rest_s": record["ttft_rest_s"],
                "decode_s": decode}
    return {"headers_s": headers, "after_headers_s": record["ttft_s"] - headers, "decode_s": decode}


def medians(records: list[dict]) -> dict[str, float]:
    """The median of each part over the requests that have it."""
    values: dict[str, list[float]] = {}
    for r in records:
        for part, seconds in parts_of(r).items():
            values.setdefault(part, []).append(seconds)
    return {part: float(np.median(v)) for part, v in values.items()}


def cause(record: dict, typical: dict[str, float], ttft_only: bool = False) -> tuple[str, float, float]:
    """(part, its seconds, the run's median of it): the part of the request furthest above its
    median, among the TTFT's parts if `ttft_only`."""
    parts = {p: s for p, s in parts_of(record).items() if not ttft_only or p in TTFT_PARTS}
    part = max(parts, key=lambda p: parts[p] - typical.get(p, 0.0))
    return part, parts[part], typical.get(part, 0.0)


def ttft_split(records: Iterable[dict]) -> dict | None:
    """{"joined", "measured", "parts": [{part, name, mean_ms, median_ms, p99_ms}], "bands": [...],
    "engine_mean_ttft_ms", "engine_p99_ttft_ms"} over the measured requests that carry the engine's
    account (its TTFT: queued plus prefill, exact); None when none does."""
    done = measured(records)
    joined = [r for r in done if r.get("ttft_rest_s") is not None]
    if not joined:
        return None
    parts = []
    for part, name in PARTS.items():
        ms = np.array([r[part] for r in joined]) * 1000
        parts.append({"part": part, "name": name, "mean_ms": float(ms.mean()), "median_ms": float(np.median(ms)),
                      "p99_ms": float(np.percentile(ms, 99))})
    engine_ttft = np.array([r["engine_queue_s"] + r["engine_prefill_s"] for r in joined]) * 1000
    return {"joined": len(joined), "measured": len(done), "parts": parts, "bands": bands(joined),
            "engine_mean_ttft_ms": float(engine_ttft.mean()), "engine_median_ttft_ms": float(np.median(engine_ttft)),
            "engine_p99_ttft_ms": float(np.percentile(engine_ttft, 99))}


def bands(joined: list[dict]) -> list[dict]:
    """For the median request and the slowest 1 % by TTFT: how many, their mean TTFT and the mean
    of each part, the part that dominates and its share, and the requests (id, start, end)."""
    ttfts = np.array([r["ttft_s"] for r in joined])
    out = []
    for name, low, high in BANDS:
        lo, hi = np.percentile(ttfts, [low, high])
        members = [r for r in joined if lo <= r["ttft_s"] <= hi]
        mean_ttft = float(np.mean([r["ttft_s"] for r in members]))
        means = {part: float(np.mean([parts_of(r)[part] for r in members])) for part in JOINED if part in TTFT_PARTS}
        top = max(means, key=lambda p: means[p])
        out.append({"band": name, "requests": len(members), "mean_ttft_ms": 1000 * mean_ttft,
                    "parts_ms": {part: 1000 * s for part, s in means.items()}, "dominant": top,
                    "dominant_name": NAMES[top], "dominant_share": means[top] / mean_ttft if mean_ttft else None,
                    "windows": [(r["start"], r["start"] + r["elapsed_s"]) for r in members]})
    return out


def slowest(records: list[dict], n: int) -> list[dict]:
    """The n slowest of the requests by TTFT, each with the part of its TTFT furthest above the
    median over all of them: [{id, scenario, start, ttft_ms, e2e_ms, cause, cause_ms, median_ms}]."""
    done = measured(records)
    typical = medians(done)
    out = []
    for r in sorted(done, key=lambda r: r["ttft_s"], reverse=True)[:n]:
        part, seconds, median = cause(r, typical, ttft_only=True)
        out.append({"id": r["id"], "scenario": r["scenario"], "start": r["start"], "ttft_ms": 1000 * r["ttft_s"],
                    "e2e_ms": 1000 * r["elapsed_s"], "cause": NAMES[part], "cause_ms": 1000 * seconds,
                    "median_ms": 1000 * median})
    return out
