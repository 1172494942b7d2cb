"""Engine-side figures of a run's window, from the sidecar's series in Prometheus."""

from __future__ import annotations

import math

from loadwatch.prometheus import PrometheusAPI

# After the last request, counters still need the next scrape to show it: read them this much later.
SETTLE_SECONDS = 15.0
E = "loadwatch_engine_"


def _ratio(numerator: str, denominator: str, window: str) -> str:
    return f"sum(increase({E}{numerator}[{window}])) / sum(increase({E}{denominator}[{window}]))"


def queries(duration: float) -> dict[str, tuple[str, bool]]:
    """name -> (PromQL, whether it reads counters, so at the window's end plus SETTLE_SECONDS)."""
    gauges = f"{max(1, math.ceil(duration))}s"
    counters = f"{max(1, math.ceil(duration + SETTLE_SECONDS))}s"
    return {
        "kv_cache_usage_peak": (f"max(max_over_time({E}kv_cache_usage_ratio_max[{gauges}]))", False),
        "kv_cache_usage_mean": (f"avg(avg_over_time({E}kv_cache_usage_ratio[{gauges}]))", False),
        "requests_waiting_peak": (f"max(max_over_time({E}requests_waiting_max[{gauges}]))", False),
        "requests_running_peak": (f"max(max_over_time({E}requests_running[{gauges}]))", False),
        "preemptions": (f"sum(increase({E}preemptions_total[{counters}]))", True),
        "prefix_cache_hit_ratio": (_ratio("prefix_cache_hits_total", "prefix_cache_queries_total", counters), True),
        "spec_decode_acceptance_ratio": (
            _ratio("spec_decode_accepted_tokens_total", "spec_decode_draft_tokens_total", counters), True),
        "spec_decode_mean_acceptance_length": (
            "1 + " + _ratio("spec_decode_accepted_tokens_total", "spec_decode_drafts_total", counters), True),
        "engine_mean_ttft_ms": (
            "1000 * " + _ratio("time_to_first_token_seconds_sum", "time_to_first_token_seconds_count", counters),
            True),
        "engine_p99_ttft_ms": (
            f"1000 * histogram_quantile(0.99, sum by (le) (increase({E}time_to_first_token_seconds_bucket"
            f"[{counters}])))", True),
        "engine_mean_e2el_ms": (
            "1000 * " + _ratio("e2e_request_latency_seconds_sum", "e2e_request_latency_seconds_count", counters),
            True),
        "queue_time_share": (_ratio("request_queue_time_seconds_sum", "e2e_request_latency_seconds_sum", counters),
                             True),
        "prefill_time_share": (
            _ratio("request_prefill_time_seconds_sum", "e2e_request_latency_seconds_sum", counters), True),
        "decode_time_share": (_ratio("request_decode_time_seconds_sum", "e2e_request_latency_seconds_sum", counters),
                              True),
    }


def engine_figures(api: PrometheusAPI, started_at: float, ended_at: float) -> dict[str, float | None]:
    """Each figure, or None where the engine does not have it (speculative decoding off, say)."""
    return {
        name: api.scalar(expr, ended_at + (SETTLE_SECONDS if counters else 0.0))
        for name, (expr, counters) in queries(ended_at - started_at).items()
    }
