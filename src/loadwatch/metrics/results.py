"""The results of a run, as the results JSON holds them: one typed model for every reader.

The keys are `vllm bench serve`'s (`completed`, `request_throughput`, `p99_ttft_ms`, ...) plus
loadwatch's own, so files stay comparable with vLLM's; the summary writes this model and the
web UI, the report, compare and annotate read it. A latency statistic is named by
`latency_key(metric, stat)` alone.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (50, 90, 95, 99)
STATS = ("mean", "median", "std", *(f"p{q}" for q in PERCENTILES))


def latency_key(metric: str, stat: str) -> str:
    """`p99_ttft_ms`: vllm bench serve's key of a latency statistic, in milliseconds."""
    return f"{stat}_{metric}_ms"


LATENCY_KEYS = tuple(latency_key(m, s) for m in LATENCY_METRICS for s in STATS)


KEPT_AT_LEAST = 0.95  # of an open loop's schedule: below, the load generator, not the server, set the pace
SHORT_OF_SCHEDULE = "the load generator, not the server, was the limit"  # said of a run kept under it


class Arrivals(BaseModel):
    """An open loop's schedule and what the load generator kept of it (metrics/samples.py: Arrivals)."""

    sent: int
    dropped: int = 0  # at --max-concurrency
    requested_rate: float | None = None  # --request-rate or the stage's level; None for a trace
    scheduled_rate: float | None = None  # the schedule as drawn: a gamma process only averages the request
    achieved_rate: float | None = None  # arrivals sent per second
    kept: float | None = None  # the schedule's span over the sends' span: 1 when every arrival was on time
    lag_ms: dict[str, float | None] = {}  # how late arrivals went out: median, p90, p99, max
    fell_short: bool = False  # kept < KEPT_AT_LEAST


class Figures(BaseModel):
    """The figures of one window: the whole run, a scenario, or a load-shape stage."""

    # Latency statistics are keys of their own (vllm's layout), kept as extra fields.
    model_config = ConfigDict(extra="allow")

    completed: int
    failed: int = 0
    cancelled: int = 0  # hung up on by the client (--cancel-ratio): neither completed nor failed
    duration: float = 0.0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    request_throughput: float = 0.0
    request_goodput: float = 0.0
    output_throughput: float = 0.0
    input_throughput: float = 0.0  # prompt tokens a second: what embeddings and rerank are measured by
    total_token_throughput: float = 0.0
    failure_ratio: float = 0.0
    failures: dict[str, int] = {}
    # What agents and reasoning models add: tool calls, thoughts, and the prompt the server had cached
    # (its share only over requests whose server said; None where none did).
    total_tool_calls: int = 0
    total_reasoning_tokens: int = 0
    total_cached_tokens: int = 0
    total_images: int = 0  # sent with the completed requests (random-mm), and their encoded bytes
    total_image_bytes: int = 0
    cached_prompt_tokens_ratio: float | None = None
    arrivals: Arrivals | None = None  # an open loop's or a trace's; None in a closed loop

    @model_validator(mode="after")
    def _latencies_are_numbers(self) -> Figures:
        for key in LATENCY_KEYS:
            value = (self.model_extra or {}).get(key)
            if value is not None and not isinstance(value, int | float):
                raise ValueError(f"{key} must be a number or null, not {value!r}")
        return self

    def latency(self, metric: str, stat: str) -> float | None:
        """A latency statistic in ms; None where the run had no such value (or the file predates it)."""
        return (self.model_extra or {}).get(latency_key(metric, stat))

    def field(self, key: str) -> Any:
        """A figure by its results key (the fixed ones or a latency key), for tables keyed by name."""
        return getattr(self, key) if key in type(self).model_fields else (self.model_extra or {}).get(key)


class Stage(Figures):
    name: str
    level: float
    unit: str
    start: float
    end: float


class Replica(Figures):
    """A fleet's replica: the figures of the requests it served (its answers named it)."""

    share: float = 0.0  # of the run's successful requests that named their replica


class Results(Figures):
    run_id: str
    target: str | None = None
    users: int | None = None  # Locust's user count as the run started: part of what makes runs comparable
    loadwatch_version: str | None = None  # of the load generator that measured it
    partial: bool = False  # a checkpoint written during the run, not its end
    # Workers whose last report never came (loadgen/workers.py): each with its host, when it was last
    # heard and how many of its requests' outcomes are unknown; never counted as successes.
    lost_workers: list[dict[str, Any]] = []
    unknown_outcomes: int = 0
    # Each worker's clock against the master's (loadgen/clocks.py); its records' times are corrected by it.
    clock_offsets: dict[str, dict[str, float]] = {}
    saturated: dict[str, str] = {}  # Locust process -> why it was a bottleneck (none: it kept up)
    busy: dict[str, float] = {}  # Locust process -> the share of a core it used over the run
    started_at: float
    ended_at: float
    warmup_requests: int = 0
    # Successful requests by how their output tokens were counted: the server's usage, its /tokenize
    # of the generated text, or an approximation (4 characters a token) when it sent no usage.
    output_tokens_counted_by: dict[str, int] = {}
    # Successful streams whose body ended without `data: [DONE]`, complete after their finish_reason
    # (and usage): a server or proxy that leaves the marker out, counted so that it shows.
    streams_without_done: int = 0
    # The server's cost, $ an hour (--price-per-hour times --gpus), and what a million tokens cost at
    # the throughput measured (metrics/cost.py); None without a price.
    price_per_hour: float | None = None
    cost_per_million_output_tokens: float | None = None
    cost_per_million_total_tokens: float | None = None
    # Trace entries not sent because they cannot fit the server's context (--trace-too-long skip).
    trace_entries_skipped: int = 0
    options: dict[str, Any] = {}
    records: str | None = None  # the per-request records file, relative to this file's folder if under it
    scenarios: dict[str, Figures] = {}
    # A fleet's (--replica): each replica's figures, over the run's window so that throughputs add up;
    # successful requests whose answer named none of them; the busiest replica's share over an even
    # share (1: even, 2: it took twice its share), the spread a user reads at a glance.
    replicas: dict[str, Replica] = {}
    unattributed: int = 0
    busiest_share_ratio: float | None = None
    # Replicas lost during the run (loadgen/replica_watch.py): each with when it was lost (and came back),
    # the requests that failed in its outage, how long the router kept sending to it and how long until
    # the client's success rate recovered.
    replicas_lost: list[dict[str, Any]] = []
    stages: list[Stage] = []
    slo: list[dict[str, Any]] = []
