"""The client metrics' buckets, help and labels (names in loadwatch.catalogue).

Buckets are vLLM V1's own so that client and engine histograms line up bucket for bucket. E2E adds
buckets under vLLM's first (0.3 s): an embeddings or rerank request is answered in milliseconds, and
a p99 interpolated inside [0, 0.3 s] read 297 ms where the exact p99 was 34 ms.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadwatch.catalogue import Client

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
TOKEN_LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)
E2E_BUCKETS = (
    0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.2,
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)

LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
RATIO_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)

LABELS = ("model", "scenario")
# A session's request carries its turn, in a few buckets so that the series stay bounded; a fleet's,
# the replica that served it (as many series as replicas); other requests carry "" for either (which
# Prometheus stores as no label at all).
LATENCY_LABELS = (*LABELS, "turn", "replica")
TURN_BUCKETS = ((1, "1"), (2, "2"), (4, "3-4"), (8, "5-8"))
LAST_TURN_BUCKET = "9+"
FAILURE_LABELS = (*LABELS, "reason")  # a failure's reason, or a rejection's admission limit
PROCESS_LABELS = ("worker",)
# The exemplars' one label: the request's X-Request-Id, as in its record and in vLLM's own request id.
EXEMPLAR_LABEL = "request_id"


def turn_bucket(turn: int | None) -> str:
    if turn is None:
        return ""
    return next((name for last, name in TURN_BUCKETS if turn <= last), LAST_TURN_BUCKET)


@dataclass(frozen=True)
class HistogramDef:
    name: str
    help: str
    buckets: tuple[float, ...]
    labels: tuple[str, ...] = LATENCY_LABELS
    # Buckets carry the request id of a recent slow request (EXEMPLAR_LABEL): the two latencies a
    # user chases from a panel's spike to a request.
    exemplars: bool = False


TTFT = HistogramDef(
    Client.TTFT,
    "Time from sending the request to the first chunk carrying generated text.",
    TTFT_BUCKETS,
    exemplars=True,
)
ITL = HistogramDef(
    Client.ITL,
    "Gap between consecutive chunks carrying generated text.",
    TOKEN_LATENCY_BUCKETS,
)
TPOT = HistogramDef(
    Client.TPOT,
    "(E2E - TTFT) / (output tokens - 1), one observation per request with more than one token.",
    TOKEN_LATENCY_BUCKETS,
)
E2E = HistogramDef(
    Client.E2E,
    "Time from sending the request to the last chunk carrying generated text (to the last byte of an "
    "embeddings or rerank answer).",
    E2E_BUCKETS,
    exemplars=True,
)
ARRIVAL_LAG = HistogramDef(
    Client.ARRIVAL_LAG,
    "Open loop: actual minus scheduled send time.",
    TTFT_BUCKETS,
    LABELS,
)
TTFA = HistogramDef(
    Client.TTFA,
    "Time from sending the request to its first answer output (text or tool-call arguments), after any "
    "reasoning; TTFT where the model does not reason first.",
    TTFT_BUCKETS,
)
CACHED_RATIO = HistogramDef(
    Client.CACHED_RATIO,
    "Share of each request's prompt the server found in its prefix cache "
    "(usage.prompt_tokens_details.cached_tokens / prompt_tokens), where it says.",
    RATIO_BUCKETS,
)
EVENT_LOOP_LAG = HistogramDef(
    Client.EVENT_LOOP_LAG,
    "How late a Locust process's event loop woke a greenlet that slept 0.1 s: its own delay on every request.",
    LAG_BUCKETS,
    PROCESS_LABELS,
)
HISTOGRAMS = {h.name: h for h in (TTFT, ITL, TPOT, E2E, TTFA, CACHED_RATIO, ARRIVAL_LAG, EVENT_LOOP_LAG)}

COUNTER_HELP = {
    Client.REQUESTS: "Finished requests, successful or not; each counted once.",
    Client.FAILURES: "Failed requests by reason.",
    Client.PROMPT_TOKENS: "Prompt tokens of successful requests (usage.prompt_tokens).",
    Client.GENERATION_TOKENS: "Generated tokens of successful requests (usage.completion_tokens).",
    Client.ARRIVALS_DROPPED: "Open loop: arrivals not sent because the concurrency cap was reached.",
    Client.CANCELLED: "Requests the client hung up on before their end (--cancel-ratio); also in requests_total.",
    Client.REJECTED: "Requests the server refused at admission (vLLM's --max-num-queued-reqs, "
                     "--max-num-queued-tokens), by the limit it named; also in requests_total, never in "
                     "request_failures.",
    Client.TOOL_CALLS: "Tool calls the model made in successful requests.",
    Client.IMAGES: "Images sent in requests (--dataset random-mm), successful or not.",
    Client.IMAGE_BYTES: "Encoded bytes (before base64) of the images sent in requests.",
    Client.CPU: "CPU time (user and system) of a Locust process; rate() is the cores it uses.",
}
COUNTER_LABELS = {Client.FAILURES: FAILURE_LABELS, Client.REJECTED: FAILURE_LABELS, Client.CPU: PROCESS_LABELS}

