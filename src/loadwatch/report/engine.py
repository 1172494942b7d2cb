"""Engine-side figures of a run's window, from the sidecar's series in Prometheus."""

from __future__ import annotations

import math

from loadwatch.catalogue import Engine, total
from loadwatch.prometheus import PrometheusAPI

# After the last request, counters still need the next scrape to show it: read them this much later.
SETTLE_SECONDS = 15.0
# NVIDIA's DCGM exporter's name, not ours (catalogue.py lists ours): each GPU's energy since boot, in mJ.
GPU_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def _ratio(numerator: str, denominator: str, window: str) -> str:
    return f"sum(increase({numerator}[{window}])) / sum(increase({denominator}[{window}]))"


def _peaks(window: str, aggregate: str) -> dict[str, str]:
    """The peaks of the engine's state over the window: what says which room it ran out of."""
    return {
        "kv_cache_usage_peak": f"{aggregate}(max_over_time({Engine.KV_CACHE_USAGE_MAX}[{window}]))",
        "requests_waiting_peak": f"{aggregate}(max_over_time({Engine.REQUESTS_WAITING_MAX}[{window}]))",
        "requests_running_peak": f"{aggregate}(max_over_time({Engine.REQUESTS_RUNNING}[{window}]))",
        # Why they waited (vLLM 0.32 and later): each reason's peak as Prometheus scraped it.
        **{f"requests_waiting_{reason}_peak":
           f'{aggregate}(max_over_time({Engine.REQUESTS_WAITING_BY_REASON}{{reason="{reason}"}}[{window}]))'
           for reason in ("capacity", "deferred")},
    }


def queries(duration: float, settle: float = SETTLE_SECONDS) -> dict[str, tuple[str, bool]]:
    """name -> (PromQL, whether it reads counters, so at the window's end plus `settle`)."""
    gauges = f"{max(1, math.ceil(duration))}s"
    counters = f"{max(1, math.ceil(duration + settle))}s"
    return {
        **{name: (expr, False) for name, expr in _peaks(gauges, "max").items()},
        "kv_cache_usage_mean": (f"avg(avg_over_time({Engine.KV_CACHE_USAGE}[{gauges}]))", False),
        # LoRA adapters (an engine with --enable-lora): the most it listed with requests, and how many one
        # batch holds (--max-loras). Prometheus's scrapes, not the sidecar's 1 s sampling.
        "lora_adapters_running_peak": (f"max(max_over_time({Engine.LORA_ADAPTERS_RUNNING}[{gauges}]))", False),
        "lora_adapters_waiting_peak": (f"max(max_over_time({Engine.LORA_ADAPTERS_WAITING}[{gauges}]))", False),
        "lora_max_adapters": (f"max(max_over_time({Engine.LORA_MAX_ADAPTERS}[{gauges}]))", False),
        # The cache's configuration, as the engine stated it during the window.
        "kv_cache_blocks": (f"max(max_over_time({Engine.KV_CACHE_BLOCKS}[{gauges}]))", False),
        "kv_cache_block_size": (f"max(max_over_time({Engine.KV_CACHE_BLOCK_SIZE}[{gauges}]))", False),
        "kv_cache_max_concurrency": (f"max(max_over_time({Engine.KV_CACHE_MAX_CONCURRENCY}[{gauges}]))", False),
        # 1 on, 0 off, None where the engine does not say.
        "prefix_caching": (f'(count(max_over_time({Engine.CACHE_CONFIG_INFO}{{prefix_caching="true"}}[{gauges}])) '
                           f"> bool 0) or (0 * count(max_over_time({Engine.CACHE_CONFIG_INFO}[{gauges}])))", False),
        "prompt_tokens_cached_share": (
            _ratio(f'{total(Engine.PROMPT_TOKENS_BY_SOURCE)}{{source!="local_compute"}}',
                   total(Engine.PROMPT_TOKENS_BY_SOURCE), counters), True),
        "iteration_tokens_mean": (_ratio(Engine.ITERATION_TOKENS + "_sum", Engine.ITERATION_TOKENS + "_count",
                                         counters), True),
        "preemptions": (f"sum(increase({total(Engine.PREEMPTIONS)}[{counters}]))", True),
        # Prompt tokens the engine took in a second over the window: at the knee, the rate its prefill
        # backlog drains at, which sizes --max-num-queued-tokens (target TTFT times this).
        "prompt_tokens_per_second": (f"sum(increase({total(Engine.PROMPT_TOKENS)}[{counters}])) / "
                                     f"{max(1.0, duration):g}", True),
        "prefix_cache_hit_ratio": (
            _ratio(total(Engine.PREFIX_CACHE_HITS), total(Engine.PREFIX_CACHE_QUERIES), counters), True),
        "spec_decode_acceptance_ratio": (
            _ratio(total(Engine.SPEC_ACCEPTED_TOKENS), total(Engine.SPEC_DRAFT_TOKENS), counters), True),
        "spec_decode_mean_acceptance_length": (
            "1 + " + _ratio(total(Engine.SPEC_ACCEPTED_TOKENS), total(Engine.SPEC_DRAFTS), counters), True),
        "engine_mean_ttft_ms": (
            "1000 * " + _ratio(Engine.TTFT + "_sum", Engine.TTFT + "_count", counters),
            True),
        "engine_p99_ttft_ms": (
            f"1000 * histogram_quantile(0.99, sum by (le) (increase({Engine.TTFT}_bucket"
            f"[{counters}])))", True),
        "engine_mean_e2el_ms": (
            "1000 * " + _ratio(Engine.E2E + "_sum", Engine.E2E + "_count", counters),
            True),
        "engine_mean_queue_ms": ("1000 * " + _ratio(Engine.QUEUE_TIME + "_sum", Engine.QUEUE_TIME + "_count",
                                                    counters), True),
        "engine_mean_prefill_ms": ("1000 * " + _ratio(Engine.PREFILL_TIME + "_sum", Engine.PREFILL_TIME + "_count",
                                                      counters), True),
        "engine_mean_decode_ms": ("1000 * " + _ratio(Engine.DECODE_TIME + "_sum", Engine.DECODE_TIME + "_count",
                                                     counters), True),
        "queue_time_share": (_ratio(Engine.QUEUE_TIME + "_sum", Engine.E2E + "_sum", counters),
                             True),
        "prefill_time_share": (
            _ratio(Engine.PREFILL_TIME + "_sum", Engine.E2E + "_sum", counters), True),
        "decode_time_share": (_ratio(Engine.DECODE_TIME + "_sum", Engine.E2E + "_sum", counters),
                              True),
        # Every GPU Prometheus scrapes over the window: the stack's, as the dashboards' GPU row shows them.
        "gpu_energy_joules": (f"sum(increase({GPU_ENERGY}[{counters}])) / 1000", True),
    }


def engine_figures(api: PrometheusAPI, started_at: float, ended_at: float,
                   settle: float = SETTLE_SECONDS) -> dict[str, float | None]:
    """Each figure, or None where the engine does not have it (speculative decoding off, say).
    Counters are read `settle` seconds after the end: nothing else may run on the engine then."""
    figures = {
        name: api.scalar(expr, ended_at + (settle if counters else 0.0))
        for name, (expr, counters) in queries(ended_at - started_at, settle).items()
    }
    # The server's own count of the requests its admission control refused (vLLM 0.32's
    # --max-num-queued-reqs or --max-num-queued-tokens), set beside the client's (rejections_compared).
    figures["admission_rejections"] = counter_rise(api, total(Engine.ADMISSION_REJECTIONS), started_at,
                                                   ended_at + settle)
    return figures


def counter_rise(api: PrometheusAPI, counter: str, start: float, end: float) -> float | None:
    """How much a counter (summed over its series) rose from `start` to `end`: its last scraped value by
    `end` less its last before `start`, so a count to compare with the client's, where increase()
    extrapolates over the window's edges (it read 328 of 350 refusals in a 30 s run). A series that
    first appeared within the window rose from 0; a reset within it (an engine restarted) makes the
    rise meaningless, and it is None then, as where the engine has no such counter."""
    after = api.scalar(f"sum({counter})", end)
    if after is None:
        return None
    before = api.scalar(f"sum({counter})", start) or 0.0
    resets = api.scalar(f"sum(resets({counter}[{max(1, math.ceil(end - start))}s]))", end)
    return after - before if not resets and after >= before else None


def rejections_compared(rejected: int, by_reason: dict[str, int], server: float | None) -> tuple[str, bool] | None:
    """The requests the server refused at admission in words, the client's count beside the engine's
    own (vllm:admission_rejections, through the sidecar), and whether the two agree; None where neither
    saw one. They can differ honestly: the engine also counts the warm-up's refusals and any other
    client's, and Prometheus' increase() extrapolates a counter over the window's edges."""
    if not rejected and not server:
        return None
    reasons = "".join(f", {reason} {n}" for reason, n in by_reason.items())
    words = f"Rejected by admission control: {rejected} by the client's count{reasons}"
    if server is None:
        return (words + "; the engine's own count is not in Prometheus (vLLM before 0.32, an engine restarted in "
                "the run, or the sidecar did not read it), so it could not be compared.", False)
    counted = round(server)
    if counted == rejected:
        return words + f"; the engine counted the same ({counted}, admission_rejections).", True
    return (words + f"; the engine counted {counted} (admission_rejections): they differ by {counted - rejected:+d} "
            "(the engine also counts refusals of requests sent outside the measured window and other clients'; a "
            "client that counts fewer took some refusals for another outcome).", False)


Peaks = dict[str, float | None]


def server_peaks(api: PrometheusAPI, started_at: float, ended_at: float) -> tuple[dict[str, Peaks],
                                                                                  dict[str, dict[str, Peaks]]]:
    """Each target's (a fleet's replica's) peaks over the window, by its name, and each data-parallel
    rank's (vLLM's `engine` label), by target and rank, for the targets that run more than one: which
    replica, or which rank, ran out of room while another had some. One query per figure, by target and
    rank: a target's peak is its busiest rank's."""
    window = f"{max(1, math.ceil(ended_at - started_at))}s"
    names = list(_peaks(window, ""))
    by_rank: dict[str, dict[str, Peaks]] = {}
    for name, expr in _peaks(window, "max by (target, engine) ").items():
        for sample in api.query(expr, ended_at):
            value, labels = float(sample["value"][1]), sample["metric"]
            by_rank.setdefault(labels.get("target", ""), {}).setdefault(labels.get("engine", ""), {})[name] = \
                None if value != value else value
    ranks = {target: {rank: {name: peaks.get(name) for name in names} for rank, peaks in sorted(each.items())}
             for target, each in by_rank.items()}
    replicas = {target: {name: max((v for peaks in each.values() if (v := peaks[name]) is not None), default=None)
                         for name in names} for target, each in ranks.items()}
    return replicas, {target: each for target, each in ranks.items() if len(each) > 1}
