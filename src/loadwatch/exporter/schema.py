"""The sidecar's stable engine metrics and the vLLM names each one is read from, newest first.

vLLM renamed its metrics twice: V0 (0.8.x with VLLM_USE_V1=0), V1 of 0.8-0.11 (`gpu_*` cache
names, `time_per_output_token_seconds` for the per-token gap) and current releases. Each entry
lists the names in order of preference, so a payload that carries both a new name and its
deprecated twin is read once.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadwatch.catalogue import ENGINE_PREFIX, Engine


@dataclass(frozen=True)
class Family:
    name: str  # the catalogue's family name, without _total
    kind: str  # gauge | counter | histogram
    help: str
    sources: tuple[str, ...]  # vLLM family names as prometheus_client parses them (no _total on counters)
    # vLLM 0.32 exports some counters at 0 whatever happens unless a flag turns them on: such a
    # family is served only once a sample has moved, so that 0 never pretends to be a reading.
    moving_only: bool = False

    @property
    def key(self) -> str:
        """The short name the sidecar's snapshots keep its values under."""
        return self.name.removeprefix(ENGINE_PREFIX)


FAMILIES = (
    Family(Engine.REQUESTS_RUNNING, "gauge", "Requests in the engine's running batch.", ("vllm:num_requests_running",)),
    Family(Engine.REQUESTS_WAITING, "gauge", "Requests queued, not yet scheduled.", ("vllm:num_requests_waiting",)),
    Family(Engine.REQUESTS_WAITING_BY_REASON, "gauge",
           "Requests queued, by reason: capacity (no room in the batch, the token budget or the KV cache) or "
           "deferred (skipped by the scheduler: blocked, over a LoRA limit, waiting on a KV transfer).",
           ("vllm:num_requests_waiting_by_reason",)),
    Family(Engine.KV_CACHE_USAGE, "gauge", "KV cache blocks in use, 0-1.",
           ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
    Family(Engine.PREFIX_CACHE_QUERIES, "counter", "Tokens looked up in the prefix cache.",
           ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")),
    Family(Engine.PREFIX_CACHE_HITS, "counter", "Tokens found in the prefix cache.",
           ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")),
    Family(Engine.SPEC_DRAFTS, "counter", "Speculative drafts proposed.", ("vllm:spec_decode_num_drafts",)),
    Family(Engine.SPEC_DRAFT_TOKENS, "counter", "Draft tokens proposed.", ("vllm:spec_decode_num_draft_tokens",)),
    Family(Engine.SPEC_ACCEPTED_TOKENS, "counter", "Draft tokens accepted.",
           ("vllm:spec_decode_num_accepted_tokens",)),
    Family(Engine.SPEC_ACCEPTED_PER_POSITION, "counter", "Draft tokens accepted, by draft position.",
           ("vllm:spec_decode_num_accepted_tokens_per_pos",)),
    Family(Engine.PREEMPTIONS, "counter", "Requests preempted by the scheduler.", ("vllm:num_preemptions",)),
    Family(Engine.PROMPT_TOKENS, "counter", "Prefill tokens processed.", ("vllm:prompt_tokens",)),
    Family(Engine.PROMPT_TOKENS_BY_SOURCE, "counter",
           "Prompt tokens by source: local_compute (prefilled), local_cache_hit (the prefix cache), "
           "external_kv_transfer.", ("vllm:prompt_tokens_by_source",)),
    Family(Engine.PROMPT_TOKENS_CACHED_BY_SOURCE, "counter",
           "Prompt tokens served from a cache, by the tier that held them: device, host, disk, p2p, "
           "external_unspecified.", ("vllm:prompt_tokens_cached_by_source",)),
    Family(Engine.GENERATION_TOKENS, "counter", "Tokens generated.", ("vllm:generation_tokens",)),
    Family(Engine.REQUEST_SUCCESS, "counter", "Requests finished, by finished_reason.", ("vllm:request_success",)),
    Family(Engine.ADMISSION_REJECTIONS, "counter", "Requests refused at admission, by reason.",
           ("vllm:admission_rejections",)),
    Family(Engine.ITERATION_TOKENS, "histogram", "Tokens per engine step: the batch-size distribution.",
           ("vllm:iteration_tokens_total",)),
    Family(Engine.TTFT, "histogram", "Engine-side time to first token.",
           ("vllm:time_to_first_token_seconds",)),
    Family(Engine.ITL, "histogram", "Engine-side gap between output tokens.",
           ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")),
    Family(Engine.E2E, "histogram", "Engine-side request latency.",
           ("vllm:e2e_request_latency_seconds",)),
    Family(Engine.QUEUE_TIME, "histogram", "Time requests waited in the queue.",
           ("vllm:request_queue_time_seconds",)),
    Family(Engine.PREFILL_TIME, "histogram", "Time requests spent in prefill.",
           ("vllm:request_prefill_time_seconds",)),
    Family(Engine.DECODE_TIME, "histogram", "Time requests spent in decode.",
           ("vllm:request_decode_time_seconds",)),
    Family(Engine.ESTIMATED_FLOPS, "counter", "Estimated floating-point operations per GPU (--enable-mfu-metrics).",
           ("vllm:estimated_flops_per_gpu",), moving_only=True),
    Family(Engine.ESTIMATED_READ_BYTES, "counter", "Estimated bytes read from memory per GPU (--enable-mfu-metrics).",
           ("vllm:estimated_read_bytes_per_gpu",), moving_only=True),
    Family(Engine.ESTIMATED_WRITE_BYTES, "counter",
           "Estimated bytes written to memory per GPU (--enable-mfu-metrics).",
           ("vllm:estimated_write_bytes_per_gpu",), moving_only=True),
    Family(Engine.HEALTHY, "gauge", "1 while the engine is healthy (vLLM with --enable-fault-tolerance).",
           ("vllm:engine_healthy",)),
)

# Families the sidecar derives from one of vLLM's rather than copies (exporter/derived.py).
CACHE_CONFIG = "vllm:cache_config_info"
SLEEP_STATE = "vllm:engine_sleep_state"
LORA_INFO = "vllm:lora_requests_info"

# V0 has no prefix-cache or spec-decode counters, only cumulative rate gauges: the ratios fall back to them.
V0_PREFIX_HIT_RATE = "vllm:gpu_prefix_cache_hit_rate"
V0_SPEC_ACCEPTANCE_RATE = "vllm:spec_decode_draft_acceptance_rate"

SUFFIXES = {"gauge": ("",), "counter": ("_total", ""), "histogram": ("_bucket", "_sum", "_count", "")}


def wanted_names() -> frozenset[str]:
    """Every sample and comment name worth parsing; the rest of a payload is skipped unparsed."""
    names = {V0_PREFIX_HIT_RATE, V0_SPEC_ACCEPTANCE_RATE, CACHE_CONFIG, SLEEP_STATE, LORA_INFO}
    for family in FAMILIES:
        for source in family.sources:
            names.update(source + suffix for suffix in SUFFIXES[family.kind])
    return frozenset(names)
