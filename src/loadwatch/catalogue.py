"""Every metric family loadwatch exports, named once: the project's stable names.

The load generator, the sidecar, the dashboards, the recording rules, the report and its plot
read the names from here; tests/unit/test_catalogue.py fails when a dashboard, rule or module names a
loadwatch series that is not here. Counters are named as prometheus_client's families take them,
without `_total`; a query adds it (`total(...)`).
"""

from __future__ import annotations

CLIENT_PREFIX = "loadwatch_client_"
ENGINE_PREFIX = "loadwatch_engine_"
ROUTER_PREFIX = "loadwatch_router_"
RUN_INFO = "loadwatch_run_info"
# The run's SLOs, one series per --slo holding its limit in the SLO's own unit (label `slo`, e.g.
# ttft_p99_ms): dashboards and alerts compare against the run's objectives, not a fixed threshold.
SLO_OBJECTIVE = "loadwatch_slo_objective"


class Client:
    """The load generator's, served by the Locust master or local runner."""

    TTFT = CLIENT_PREFIX + "time_to_first_token_seconds"
    ITL = CLIENT_PREFIX + "inter_token_latency_seconds"
    TPOT = CLIENT_PREFIX + "time_per_output_token_seconds"
    E2E = CLIENT_PREFIX + "e2e_request_latency_seconds"
    ARRIVAL_LAG = CLIENT_PREFIX + "arrival_lag_seconds"
    TTFA = CLIENT_PREFIX + "time_to_first_answer_token_seconds"
    CACHED_RATIO = CLIENT_PREFIX + "cached_prompt_tokens_ratio"
    TOOL_CALLS = CLIENT_PREFIX + "tool_calls"
    REQUESTS = CLIENT_PREFIX + "requests"
    FAILURES = CLIENT_PREFIX + "request_failures"
    CANCELLED = CLIENT_PREFIX + "requests_cancelled"
    # Refused by the server's admission control (label `reason`: vLLM's max_num_queued_reqs or
    # max_num_queued_tokens), the client's side of Engine.ADMISSION_REJECTIONS.
    REJECTED = CLIENT_PREFIX + "requests_rejected"
    PROMPT_TOKENS = CLIENT_PREFIX + "prompt_tokens"
    GENERATION_TOKENS = CLIENT_PREFIX + "generation_tokens"
    IMAGES = CLIENT_PREFIX + "images"  # sent in requests (--dataset random-mm), and their encoded bytes
    IMAGE_BYTES = CLIENT_PREFIX + "image_bytes"
    ARRIVALS_DROPPED = CLIENT_PREFIX + "arrivals_dropped"
    USERS = CLIENT_PREFIX + "users"
    IN_FLIGHT = CLIENT_PREFIX + "requests_in_flight"
    # The load generator's own health, per Locust process (label `worker`: local, or the worker's index).
    EVENT_LOOP_LAG = CLIENT_PREFIX + "event_loop_lag_seconds"
    CPU = CLIENT_PREFIX + "cpu_seconds"


class Engine:
    """The sidecar's stable schema of vLLM's /metrics."""

    UP = ENGINE_PREFIX + "up"
    SCRAPE_DURATION = ENGINE_PREFIX + "scrape_duration_seconds"
    SCRAPE_ERRORS = ENGINE_PREFIX + "scrape_errors"
    REQUESTS_RUNNING = ENGINE_PREFIX + "requests_running"
    REQUESTS_WAITING = ENGINE_PREFIX + "requests_waiting"
    REQUESTS_WAITING_MAX = ENGINE_PREFIX + "requests_waiting_max"
    # Why they wait (label `reason`): capacity (no room: batch, token budget or KV cache) or deferred
    # (skipped by the scheduler: blocked, a LoRA limit, a KV transfer).
    REQUESTS_WAITING_BY_REASON = ENGINE_PREFIX + "requests_waiting_by_reason"
    KV_CACHE_USAGE = ENGINE_PREFIX + "kv_cache_usage_ratio"
    KV_CACHE_USAGE_MAX = ENGINE_PREFIX + "kv_cache_usage_ratio_max"
    PREFIX_CACHE_QUERIES = ENGINE_PREFIX + "prefix_cache_queries"
    PREFIX_CACHE_HITS = ENGINE_PREFIX + "prefix_cache_hits"
    PREFIX_CACHE_HIT_RATIO = ENGINE_PREFIX + "prefix_cache_hit_ratio"
    SPEC_DRAFTS = ENGINE_PREFIX + "spec_decode_drafts"
    SPEC_DRAFT_TOKENS = ENGINE_PREFIX + "spec_decode_draft_tokens"
    SPEC_ACCEPTED_TOKENS = ENGINE_PREFIX + "spec_decode_accepted_tokens"
    SPEC_ACCEPTED_PER_POSITION = ENGINE_PREFIX + "spec_decode_accepted_tokens_per_position"
    SPEC_ACCEPTANCE_RATIO = ENGINE_PREFIX + "spec_decode_acceptance_ratio"
    SPEC_MEAN_ACCEPTANCE_LENGTH = ENGINE_PREFIX + "spec_decode_mean_acceptance_length"
    PREEMPTIONS = ENGINE_PREFIX + "preemptions"
    PROMPT_TOKENS = ENGINE_PREFIX + "prompt_tokens"
    # Prompt tokens by where they came from (label `source`: local_compute, local_cache_hit,
    # external_kv_transfer), and the cached ones by the tier that held them (device, host, disk, p2p...).
    PROMPT_TOKENS_BY_SOURCE = ENGINE_PREFIX + "prompt_tokens_by_source"
    PROMPT_TOKENS_CACHED_BY_SOURCE = ENGINE_PREFIX + "prompt_tokens_cached_by_source"
    GENERATION_TOKENS = ENGINE_PREFIX + "generation_tokens"
    REQUEST_SUCCESS = ENGINE_PREFIX + "request_success"
    ADMISSION_REJECTIONS = ENGINE_PREFIX + "admission_rejections"
    ITERATION_TOKENS = ENGINE_PREFIX + "iteration_tokens"
    TTFT = ENGINE_PREFIX + "time_to_first_token_seconds"
    ITL = ENGINE_PREFIX + "inter_token_latency_seconds"
    E2E = ENGINE_PREFIX + "e2e_request_latency_seconds"
    QUEUE_TIME = ENGINE_PREFIX + "request_queue_time_seconds"
    PREFILL_TIME = ENGINE_PREFIX + "request_prefill_time_seconds"
    DECODE_TIME = ENGINE_PREFIX + "request_decode_time_seconds"
    # The KV cache's configuration, from vllm:cache_config_info: numbers as gauges PromQL computes with.
    KV_CACHE_BLOCKS = ENGINE_PREFIX + "kv_cache_blocks"
    KV_CACHE_BLOCK_SIZE = ENGINE_PREFIX + "kv_cache_block_size_tokens"
    KV_CACHE_SIZE = ENGINE_PREFIX + "kv_cache_size_tokens"
    KV_CACHE_MAX_CONCURRENCY = ENGINE_PREFIX + "kv_cache_max_concurrency"  # requests of max_model_len it holds
    CACHE_CONFIG_INFO = ENGINE_PREFIX + "cache_config_info"  # prefix_caching, cache_dtype
    # How busy the compute is (--enable-mfu-metrics): present once they move.
    ESTIMATED_FLOPS = ENGINE_PREFIX + "estimated_flops_per_gpu"
    ESTIMATED_READ_BYTES = ENGINE_PREFIX + "estimated_read_bytes_per_gpu"
    ESTIMATED_WRITE_BYTES = ENGINE_PREFIX + "estimated_write_bytes_per_gpu"
    SLEEP_LEVEL = ENGINE_PREFIX + "sleep_level"  # 0 awake, 1 weights offloaded, 2 everything discarded
    HEALTHY = ENGINE_PREFIX + "healthy"  # vllm:engine_healthy, with --enable-fault-tolerance
    # LoRA adapters, from vllm:lora_requests_info's latest series (exporter/derived.py): how many adapters
    # it lists as running and as waiting, and --max-loras, the adapters one batch holds.
    LORA_ADAPTERS_RUNNING = ENGINE_PREFIX + "lora_adapters_running"
    LORA_ADAPTERS_WAITING = ENGINE_PREFIX + "lora_adapters_waiting"
    LORA_MAX_ADAPTERS = ENGINE_PREFIX + "lora_max_adapters"


class Router:
    """The sidecar's stable schema of a fleet's router (label `router`; `replica`: the sidecar's target
    name of the replica a series is about, or the router's URL of it where no target has that URL)."""

    UP = ROUTER_PREFIX + "up"  # 1 when the sidecar's last sample of the router succeeded and is recent
    REQUESTS = ROUTER_PREFIX + "requests"  # clients' requests it took, by route (smg: endpoint)
    REQUEST_ERRORS = ROUTER_PREFIX + "request_errors"  # by route and error_type
    RETRIES = ROUTER_PREFIX + "retries"  # requests it sent again, to another replica, by route
    # Requests it sent to each replica, tries that failed included (vllm-router's processed_requests,
    # smg's worker_requests).
    REPLICA_REQUESTS = ROUTER_PREFIX + "replica_requests"
    REPLICA_HEALTHY = ROUTER_PREFIX + "replica_healthy"  # 1 healthy, 0 marked unhealthy by its health checks
    REPLICA_RUNNING = ROUTER_PREFIX + "replica_requests_running"  # as the router counts them (load-aware policies)
    # 0 closed (sending), 1 open (not sending), 2 half-open (trying again)
    REPLICA_CIRCUIT_BREAKER = ROUTER_PREFIX + "replica_circuit_breaker_state"
    # What the breaker counted of each replica's tries, by outcome (success, failure): what opens it
    REPLICA_CIRCUIT_BREAKER_OUTCOMES = ROUTER_PREFIX + "replica_circuit_breaker_outcomes"
    REPLICAS_ACTIVE = ROUTER_PREFIX + "replicas_active"
    POLICY_DECISIONS = ROUTER_PREFIX + "policy_decisions"  # by policy and replica
    CACHE_HITS = ROUTER_PREFIX + "cache_hits"  # cache-aware routing: a prompt's prefix found on a replica
    CACHE_MISSES = ROUTER_PREFIX + "cache_misses"
    # Prefix-aware routing's decisions by policy, stage and outcome (prefix_hit, prefix_miss,
    # load_imbalance, missing_tokens: the router could not read the prompt's tokens)
    PREFIX_DECISIONS = ROUTER_PREFIX + "prefix_routing_decisions"


def total(counter: str) -> str:
    """A counter's sample name in queries."""
    return counter + "_total"


def names() -> frozenset[str]:
    """Every family name of the catalogue."""
    return frozenset({RUN_INFO, SLO_OBJECTIVE} | {value for group in (Client, Engine, Router)
                                                  for key, value in vars(group).items() if key.isupper()})
