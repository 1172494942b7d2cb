"""The result files of the tools users compare loadwatch with, read as loadwatch's results, so that
`loadwatch compare` puts them side by side: `vllm bench serve --save-result` (its per-request lists
too, with --save-detailed), GuideLLM's benchmarks JSON and AIPerf's profile export.

The figures carry the names they have in loadwatch's results, but the tools do not all define them
alike: DEFINITIONS says how each measures what the tables show, and `compare` prints it under them.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np

from loadwatch.metrics.results import PERCENTILES, Results, latency_key

DEFINITIONS = {
    "loadwatch": "TTFT ends at the first chunk with generated text, reasoning or a tool call's arguments (not "
                 "the role chunk); ITL is the gaps between such chunks; output tokens are the usage's (or "
                 "/tokenize's of the text, said so); E2E ends at the last such chunk.",
    "vllm bench serve": "TTFT ends at the first chunk that has `choices`: the role chunk counts, empty or not, "
                        "so a server that sends its role before its first token shows a shorter TTFT; ITL is "
                        "the gaps between every later chunk with choices; output tokens are the usage's; "
                        "reasoning counts as output.",
    "GuideLLM": "TTFT ends at the first chunk with text, reasoning or tool calls, as loadwatch's; its "
                "inter-token latency, a request's (last token - first) / (tokens - 1), is shown as TPOT; its "
                "own TPOT (E2E over every token, the first included) is left out; output tokens are the usage's.",
    "AIPerf": "TTFT ends at the first chunk with content; its inter-token latency, a request's (latency - "
              "TTFT) / (tokens - 1), is shown as TPOT and its inter-chunk latency as ITL; output tokens and "
              "every rate over them are counted with the tokenizer it is given, not the server's usage "
              "(a server whose tokens its tokenizer splits otherwise shows other TPOT and tok/s).",
}


class NotAPeer(ValueError):
    """The file is none of the peers' results."""


def _ms_stats(stats: dict, prefix: str, keys: dict[str, str], scale: float = 1.0) -> dict[str, float]:
    """loadwatch's latency keys for one metric from a peer's {stat name: value} (ms unless scaled)."""
    out = {}
    for ours, theirs in keys.items():
        value = stats.get(theirs)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[latency_key(prefix, ours)] = value * scale
    return out


def _vllm(data: dict, path: Path) -> tuple[Results, dict[str, np.ndarray] | None]:
    started = datetime.strptime(data["date"], "%Y%m%d-%H%M%S").timestamp() if "date" in data else 0.0
    figures = {k: data[k] for k in ("completed", "failed", "duration", "total_input_tokens", "total_output_tokens",
                                     "request_throughput", "output_throughput", "total_token_throughput")
               if isinstance(data.get(k), int | float)}
    latencies = {k: v for k, v in data.items() if k.endswith("_ms") and isinstance(v, int | float)}
    for metric in ("ttft", "tpot", "itl", "e2el"):  # vllm's median is our p50 too
        if latency_key(metric, "median") in latencies:
            latencies.setdefault(latency_key(metric, "p50"), latencies[latency_key(metric, "median")])
    duration = figures.get("duration", 0.0)
    if duration:
        figures["input_throughput"] = figures.get("total_input_tokens", 0) / duration
    per_request = None
    if isinstance(data.get("ttfts"), list) and isinstance(data.get("latencies"), list):  # --save-detailed
        ok = [i for i, e in enumerate(data.get("errors") or [""] * len(data["ttfts"])) if not e]
        ttft = np.array([data["ttfts"][i] for i in ok], dtype=float) * 1000
        e2el = np.array([data["latencies"][i] for i in ok], dtype=float) * 1000
        outputs = data.get("output_lens") or []
        tpot = np.array([(e2el[j] - ttft[j]) / (outputs[i] - 1) for j, i in enumerate(ok)
                         if i < len(outputs) and outputs[i] and outputs[i] > 1], dtype=float)
        per_request = {"ttft": ttft, "e2el": e2el, "tpot": tpot}
        for metric, values in per_request.items():  # what --percentile-metrics left out (e2el by default)
            if values.size and latency_key(metric, "mean") not in latencies:
                latencies |= {latency_key(metric, "mean"): float(values.mean()),
                              latency_key(metric, "median"): float(np.median(values)),
                              latency_key(metric, "std"): float(values.std()),
                              **{latency_key(metric, f"p{q}"): float(np.percentile(values, q)) for q in PERCENTILES}}
    results = Results.model_validate({**figures, **latencies, "run_id": f"vllm bench serve {path.name}",
                                      "target": data.get("model_id"), "started_at": started,
                                      "ended_at": started + duration,
                                      "request_goodput": data.get("request_goodput") or 0.0})
    return results, per_request


def _stat(block: dict | None, *names: str) -> float | None:
    for name in names:
        value = (block or {}).get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _guidellm(data: dict, path: Path) -> tuple[Results, None]:
    """GuideLLM's benchmarks JSON: its first benchmark (one rate); each metric over its successful
    requests. Its inter-token latency is a request's (last token - first) / (tokens - 1): loadwatch's
    TPOT; its own TPOT (E2E over every token) has no counterpart and is left out."""
    benchmark = data["benchmarks"][0]
    metrics = benchmark.get("metrics") or {}

    def successful(name: str) -> dict:
        block = metrics.get(name) or {}
        return block.get("successful") or block

    figures: dict[str, float] = {}
    for ours, theirs, scale in (("ttft", "time_to_first_token_ms", 1.0), ("tpot", "inter_token_latency_ms", 1.0),
                                ("e2el", "request_latency", 1000.0)):
        block = successful(theirs)
        percentiles = block.get("percentiles") or {}
        for stat, value in (("mean", _stat(block, "mean")), ("median", _stat(block, "median")),
                            ("std", _stat(block, "std_dev")), ("p50", _stat(percentiles, "p50")),
                            ("p90", _stat(percentiles, "p90")), ("p95", _stat(percentiles, "p95")),
                            ("p99", _stat(percentiles, "p99"))):
            if value is not None:
                figures[latency_key(ours, stat)] = value * scale
    totals = metrics.get("request_totals") or {}
    start = _stat(benchmark, "start_time") or 0.0
    duration = _stat(benchmark, "duration") or max((_stat(benchmark, "end_time") or start) - start, 0.0)
    return Results.model_validate({
        **figures, "run_id": f"GuideLLM {path.name}", "started_at": start, "ended_at": start + duration,
        "duration": duration, "completed": int(_stat(totals, "successful") or 0),
        "failed": int(_stat(totals, "errored") or 0),
        "total_output_tokens": int(_stat(successful("output_token_count"), "total_sum") or 0),
        "total_input_tokens": int(_stat(successful("prompt_token_count"), "total_sum") or 0),
        "request_throughput": _stat(successful("requests_per_second"), "mean") or 0.0,
        "output_throughput": _stat(successful("output_tokens_per_second"), "mean") or 0.0,
        "input_throughput": _stat(successful("prompt_tokens_per_second"), "mean") or 0.0,
        "total_token_throughput": _stat(successful("tokens_per_second"), "mean") or 0.0}), None


def _when(text: object) -> float:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return 0.0


def _aiperf(data: dict, path: Path) -> tuple[Results, None]:
    """AIPerf's profile_export_aiperf.json: each metric a block of avg, std, p50 ... in its unit. Its
    inter-token latency is a request's (latency - TTFT) / (tokens - 1): loadwatch's TPOT; its
    inter-chunk latency is loadwatch's ITL."""
    figures: dict[str, float] = {}
    for ours, theirs in (("ttft", "time_to_first_token"), ("tpot", "inter_token_latency"),
                         ("itl", "inter_chunk_latency"), ("e2el", "request_latency")):
        block = data.get(theirs) or {}
        scale = {"ms": 1.0, "sec": 1000.0, "s": 1000.0, "us": 1e-3, "ns": 1e-6}.get(str(block.get("unit", "ms")), 1.0)
        figures.update(_ms_stats(block, ours, {"mean": "avg", "median": "p50", "std": "std", "p50": "p50",
                                               "p90": "p90", "p95": "p95", "p99": "p99"}, scale))
    start = _when(data.get("start_time"))
    duration = _stat(data.get("benchmark_duration"), "avg") or 0.0
    completed = _stat(data.get("completed_request_count"), "avg") or _stat(data.get("request_count"), "avg") or 0
    return Results.model_validate({
        **figures, "run_id": f"AIPerf {path.name}", "started_at": start, "ended_at": start + duration,
        "duration": duration, "completed": int(completed),
        "failed": int(_stat(data.get("error_request_count"), "avg") or 0),
        "request_throughput": _stat(data.get("request_throughput"), "avg") or 0.0,
        "output_throughput": _stat(data.get("output_token_throughput"), "avg") or 0.0,
        "input_throughput": _stat(data.get("input_token_throughput"), "avg") or 0.0,
        "total_token_throughput": _stat(data.get("total_token_throughput"), "avg") or 0.0,
        "total_output_tokens": int(_stat(data.get("total_output_tokens"), "avg") or 0),
        "total_input_tokens": int(_stat(data.get("total_isl"), "avg") or 0)}), None


def tool_of(data: object) -> str | None:
    """Which peer wrote this result JSON; None for none of them."""
    if not isinstance(data, dict):
        return None
    if "backend" in data and "mean_ttft_ms" in data and "request_throughput" in data:
        return "vllm bench serve"
    if isinstance(data.get("benchmarks"), list) and data["benchmarks"] and "metrics" in data["benchmarks"][0]:
        return "GuideLLM"
    if isinstance(data.get("time_to_first_token"), dict) and "avg" in data["time_to_first_token"]:
        return "AIPerf"
    return None


READERS = {"vllm bench serve": _vllm, "GuideLLM": _guidellm, "AIPerf": _aiperf}


def read_peer(path: Path) -> tuple[str, Results, dict[str, np.ndarray] | None]:
    """The tool, its results as loadwatch's, and its per-request latencies (ms) where it kept them;
    NotAPeer when the file is none of theirs."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise NotAPeer(str(exc)) from None
    tool = tool_of(data)
    if tool is None:
        raise NotAPeer(f"{path} is no result of vllm bench serve, GuideLLM or AIPerf")
    try:
        results, latencies = READERS[tool](data, path)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise NotAPeer(f"{path} looks like {tool}'s result but cannot be read: {exc}") from None
    return tool, results, latencies
