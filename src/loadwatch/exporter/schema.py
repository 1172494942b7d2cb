"""The engine metrics of DESIGN.md and the vLLM names each one is read from, newest first.

vLLM renamed its metrics twice: V0 (0.8.x with VLLM_USE_V1=0), V1 of 0.8-0.11 (`gpu_*` cache
names, `time_per_output_token_seconds` for the per-token gap) and current releases. Each entry
lists the names in order of preference, so a payload that carries both a new name and its
deprecated twin is read once.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "loadwatch_engine_"


@dataclass(frozen=True)
class Family:
    name: str  # loadwatch family name, without _total
    kind: str  # gauge | counter | histogram
    help: str
    sources: tuple[str, ...]  # vLLM family names as prometheus_client parses them (no _total on counters)


FAMILIES = (
    Family("requests_running", "gauge", "Requests in the engine's running batch.", ("vllm:num_requests_running",)),
    Family("requests_waiting", "gauge", "Requests queued, not yet scheduled.", ("vllm:num_requests_waiting",)),
    Family("kv_cache_usage_ratio", "gauge", "KV cache blocks in use, 0-1.",
           ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
    Family("prefix_cache_queries", "counter", "Tokens looked up in the prefix cache.",
           ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")),
    Family("prefix_cache_hits", "counter", "Tokens found in the prefix cache.",
           ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")),
    Family("spec_decode_drafts", "counter", "Speculative drafts proposed.", ("vllm:spec_decode_num_drafts",)),
    Family("spec_decode_draft_tokens", "counter", "Draft tokens proposed.", ("vllm:spec_decode_num_draft_tokens",)),
    Family("spec_decode_accepted_tokens", "counter", "Draft tokens accepted.",
           ("vllm:spec_decode_num_accepted_tokens",)),
    Family("spec_decode_accepted_tokens_per_position", "counter", "Draft tokens accepted, by draft position.",
           ("vllm:spec_decode_num_accepted_tokens_per_pos",)),
    Family("preemptions", "counter", "Requests preempted by the scheduler.", ("vllm:num_preemptions",)),
    Family("prompt_tokens", "counter", "Prefill tokens processed.", ("vllm:prompt_tokens",)),
    Family("generation_tokens", "counter", "Tokens generated.", ("vllm:generation_tokens",)),
    Family("request_success", "counter", "Requests finished, by finished_reason.", ("vllm:request_success",)),
    Family("admission_rejections", "counter", "Requests refused at admission, by reason.",
           ("vllm:admission_rejections",)),
    Family("iteration_tokens", "histogram", "Tokens per engine step: the batch-size distribution.",
           ("vllm:iteration_tokens_total",)),
    Family("time_to_first_token_seconds", "histogram", "Engine-side time to first token.",
           ("vllm:time_to_first_token_seconds",)),
    Family("inter_token_latency_seconds", "histogram", "Engine-side gap between output tokens.",
           ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")),
    Family("e2e_request_latency_seconds", "histogram", "Engine-side request latency.",
           ("vllm:e2e_request_latency_seconds",)),
    Family("request_queue_time_seconds", "histogram", "Time requests waited in the queue.",
           ("vllm:request_queue_time_seconds",)),
    Family("request_prefill_time_seconds", "histogram", "Time requests spent in prefill.",
           ("vllm:request_prefill_time_seconds",)),
    Family("request_decode_time_seconds", "histogram", "Time requests spent in decode.",
           ("vllm:request_decode_time_seconds",)),
)

# V0 has no prefix-cache or spec-decode counters, only cumulative rate gauges: the ratios fall back to them.
V0_PREFIX_HIT_RATE = "vllm:gpu_prefix_cache_hit_rate"
V0_SPEC_ACCEPTANCE_RATE = "vllm:spec_decode_draft_acceptance_rate"

SUFFIXES = {"gauge": ("",), "counter": ("_total", ""), "histogram": ("_bucket", "_sum", "_count", "")}


def wanted_names() -> frozenset[str]:
    """Every sample and comment name worth parsing; the rest of a payload is skipped unparsed."""
    names = {V0_PREFIX_HIT_RATE, V0_SPEC_ACCEPTANCE_RATE}
    for family in FAMILIES:
        for source in family.sources:
            names.update(source + suffix for suffix in SUFFIXES[family.kind])
    return frozenset(names)
