"""Client metric names and buckets fixed by DESIGN.md.

Buckets are vLLM V1's own so that client and engine histograms line up bucket for bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
TOKEN_LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)

PREFIX = "loadwatch_client_"
LABELS = ("model", "scenario")
FAILURE_LABELS = (*LABELS, "reason")


@dataclass(frozen=True)
class HistogramDef:
    name: str
    help: str
    buckets: tuple[float, ...]


TTFT = HistogramDef(
    PREFIX + "time_to_first_token_seconds",
    "Time from sending the request to the first chunk carrying generated text.",
    TTFT_BUCKETS,
)
ITL = HistogramDef(
    PREFIX + "inter_token_latency_seconds",
    "Gap between consecutive chunks carrying generated text.",
    TOKEN_LATENCY_BUCKETS,
)
TPOT = HistogramDef(
    PREFIX + "time_per_output_token_seconds",
    "(E2E - TTFT) / (output tokens - 1), one observation per request with more than one token.",
    TOKEN_LATENCY_BUCKETS,
)
E2E = HistogramDef(
    PREFIX + "e2e_request_latency_seconds",
    "Time from sending the request to the last chunk carrying generated text.",
    E2E_BUCKETS,
)
ARRIVAL_LAG = HistogramDef(
    "loadwatch_client_arrival_lag_seconds",
    "Open loop: actual minus scheduled send time.",
    TTFT_BUCKETS,
)
HISTOGRAMS = {h.name: h for h in (TTFT, ITL, TPOT, E2E, ARRIVAL_LAG)}

REQUESTS = PREFIX + "requests"
FAILURES = PREFIX + "request_failures"
PROMPT_TOKENS = PREFIX + "prompt_tokens"
GENERATION_TOKENS = PREFIX + "generation_tokens"
ARRIVALS_DROPPED = PREFIX + "arrivals_dropped"
COUNTER_HELP = {
    REQUESTS: "Finished requests, successful or not; each counted once.",
    FAILURES: "Failed requests by reason.",
    PROMPT_TOKENS: "Prompt tokens of successful requests (usage.prompt_tokens).",
    GENERATION_TOKENS: "Generated tokens of successful requests (usage.completion_tokens).",
    ARRIVALS_DROPPED: "Open loop: arrivals not sent because the concurrency cap was reached.",
}

USERS = PREFIX + "users"
IN_FLIGHT = PREFIX + "requests_in_flight"
RUN_INFO = "loadwatch_run_info"
