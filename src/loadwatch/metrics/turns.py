"""A session run turn by turn, from its per-request records: how TTFT and the prefix cache change
as the conversations grow."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from loadwatch.metrics.definitions import LAST_TURN_BUCKET, TURN_BUCKETS, turn_bucket

ORDER = [name for _, name in TURN_BUCKETS] + [LAST_TURN_BUCKET]


def by_turn(records: Iterable[dict]) -> list[dict]:
    """One row per turn bucket that had requests (warm-up left out): requests, failures, TTFT mean,
    median and p99 (ms), mean prompt tokens, the share of the prompt the server had cached (where it
    said) and tool calls. Empty when no request belonged to a session."""
    groups: dict[str, dict] = {}
    for r in records:
        if r.get("turn") is None or r["stage"] == "warmup":
            continue
        g = groups.setdefault(turn_bucket(r["turn"]), {"ttft": [], "failed": 0, "prompt": [], "cached": 0,
                                                       "cache_prompt": 0, "tool_calls": 0})
        if r["failure"] is not None:
            g["failed"] += 1
            continue
        g["ttft"].append(r["ttft_s"] * 1000)
        g["prompt"].append(r["prompt_tokens"] or 0)
        if r.get("cached_tokens") is not None:
            g["cached"] += r["cached_tokens"]
            g["cache_prompt"] += r["prompt_tokens"] or 0
        g["tool_calls"] += r.get("tool_calls") or 0
    rows = []
    for name in (n for n in ORDER if n in groups):
        g = groups[name]
        ttft = np.array(g["ttft"])
        rows.append({"turn": name, "completed": len(ttft), "failed": g["failed"],
                     "mean_ttft_ms": float(ttft.mean()) if len(ttft) else None,
                     "median_ttft_ms": float(np.median(ttft)) if len(ttft) else None,
                     "p99_ttft_ms": float(np.percentile(ttft, 99)) if len(ttft) else None,
                     "mean_prompt_tokens": float(np.mean(g["prompt"])) if g["prompt"] else None,
                     "cached_prompt_tokens_ratio": g["cached"] / g["cache_prompt"] if g["cache_prompt"] else None,
                     "tool_calls": g["tool_calls"]})
    return rows
