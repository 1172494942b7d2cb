"""The results of a run, as the results JSON holds them: one typed model for every reader.

The keys are `vllm bench serve`'s (`completed`, `request_throughput`, `p99_ttft_ms`, ...) plus
loadwatch's own, so files stay comparable with vLLM's; the summary writes this model and the
web UI, the report, compare and annotate read it. A latency statistic is named by
`latency_key(metric, stat)` alone.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from loadwatch.metrics.slo import SLO

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

    completed: int = Field(description="requests that completed (streamed to their end, or answered)")
    failed: int = Field(0, description="requests that failed, by any reason in `failures`")
    rejected: int = Field(0, description="requests the server refused by admission control (vLLM's 503 at "
                                         "--max-num-queued-reqs or --max-num-queued-tokens): neither completed "
                                         "nor failed; completed + failed + rejected + cancelled are the requests "
                                         "sent")
    cancelled: int = Field(0, description="requests the client hung up on (--cancel-ratio): neither completed nor "
                                          "failed")
    duration: float = Field(0.0, description="seconds of the window the figures cover (the run's, without its warm-up)")
    total_input_tokens: int = Field(0, description="prompt tokens of the completed requests")
    total_output_tokens: int = Field(0, description="output tokens of the completed requests (the server's usage "
                                                    "where it sent one)")
    request_throughput: float = Field(0.0, description="completed requests a second")
    request_goodput: float = Field(0.0, description="completed requests a second that met every per-request SLO "
                                                    "(TTFT, TPOT, E2E)")
    output_throughput: float = Field(0.0, description="output tokens a second")
    input_throughput: float = Field(0.0, description="prompt tokens a second: what embeddings and rerank are measured"
                                                     " by")
    total_token_throughput: float = Field(0.0, description="prompt and output tokens a second")
    failure_ratio: float = Field(0.0, description="failed requests over all that ended: completed, failed and "
                                                  "rejected (0 to 1)")
    failures: dict[str, int] = Field({}, description="failed requests by reason (http_500, timeout, stream_cut, ...)")
    rejected_ratio: float = Field(0.0, description="rejected requests over all that ended: completed, failed and "
                                                   "rejected (0 to 1)")
    rejections: dict[str, int] = Field({}, description="rejected requests by the admission limit the server named "
                                                       "(max_num_queued_reqs, max_num_queued_tokens)")
    total_tool_calls: int = Field(0, description="tool calls the completed requests' answers made")
    total_reasoning_tokens: int = Field(0, description="output tokens the server counted as reasoning")
    total_cached_tokens: int = Field(0, description="prompt tokens the server found in its prefix cache")
    total_images: int = Field(0, description="images sent with the completed requests (random-mm)")
    total_image_bytes: int = Field(0, description="their encoded bytes")
    cached_prompt_tokens_ratio: float | None = Field(None, description="cached prompt tokens over prompt tokens, over"
                                                                       " the requests whose server said (null where "
                                                                       "none did)")
    arrivals: Arrivals | None = Field(None, description="an open loop's or a trace's schedule and what was kept of it"
                                                        " (sent, dropped, requested, scheduled and achieved rate, "
                                                        "kept, lag_ms, fell_short); null in a closed loop")

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
    """A fleet's replica: the figures of the requests it served, and of those that failed where their
    answer named it (an error status or a cut stream behind smg, whose header names the replica)."""

    share: float = Field(0.0, description="of the run's successful requests that named their replica")


class Results(Figures):
    run_id: str = Field(description="the run's id, as the run_info series and Grafana's annotations name it")
    target: str | None = Field(None, description="the server's base URL")
    users: int | None = Field(None, description="Locust's user count as the run started: part of what makes runs "
                                                "comparable")
    loadwatch_version: str | None = Field(None, description="the version of loadwatch that measured it")
    partial: bool = Field(False, description="true in a checkpoint written during the run (NAME.partial.json), false "
                                             "at its end")
    lost_workers: list[dict[str, Any]] = Field([], description="workers whose last report never came: each with its "
                                                               "host, when it was last heard and how many of its "
                                                               "requests' outcomes are unknown (never counted as "
                                                               "successes)")
    unknown_outcomes: int = Field(0, description="requests whose outcome a lost worker took with it")
    clock_offsets: dict[str, dict[str, float]] = Field({}, description="each worker's clock against the master's; its"
                                                                       " records' times are corrected by it")
    saturated: dict[str, str] = Field({}, description="Locust process -> why it was a bottleneck (empty: every "
                                                      "process kept up)")
    busy: dict[str, float] = Field({}, description="Locust process -> the share of a core it used over the run")
    started_at: float = Field(description="when the measured window began (Unix time, seconds)")
    ended_at: float = Field(description="when it ended (Unix time, seconds)")
    warmup_requests: int = Field(0, description="requests of the warm-up, left out of every figure")
    output_tokens_counted_by: dict[str, int] = Field({}, description="completed requests by how their output tokens "
                                                                     "were counted: the server's usage, its /tokenize"
                                                                     " of the text, or 4 characters a token when it "
                                                                     "sent no usage")
    streams_without_done: int = Field(0, description="completed streams whose body ended without `data: [DONE]` "
                                                     "(after their finish_reason and usage)")
    price_per_hour: float | None = Field(None, description="the server's cost, $ an hour (--price-per-hour times "
                                                           "--gpus); null without a price")
    cost_per_million_output_tokens: float | None = Field(None, description="$ per million output tokens at the "
                                                                           "throughput measured")
    cost_per_million_total_tokens: float | None = Field(None, description="$ per million prompt and output tokens at "
                                                                          "the throughput measured")
    trace_entries_skipped: int = Field(0, description="trace entries not sent because they cannot fit the server's "
                                                      "context (--trace-too-long skip)")
    options: dict[str, Any] = Field({}, description="the workload options the run was given (dataset, lengths, rate, "
                                                    "shape, ...)")
    records: str | None = Field(None, description="the per-request records file, relative to this file's folder where"
                                                  " it is under it")
    scenarios: dict[str, Figures] = Field({}, description="the same figures for each scenario (a locustfile's task)")
    models: dict[str, Figures] = Field({}, description="a traffic split's (--model NAME=SHARE,...): each model's or "
                                       "LoRA adapter's figures over the run, where it sent to more than one")
    replicas: dict[str, Replica] = Field({}, description="a fleet's (--replica): each replica's figures over the "
                                                         "run's window, with its `share` of the successful requests; "
                                                         "its `failed` and `failures`: the failed requests whose "
                                                         "answer named it (smg's header)")
    unattributed: int = Field(0, description="successful requests whose answer named none of the replicas")
    busiest_share_ratio: float | None = Field(None, description="the busiest replica's share over an even share (1: "
                                                                "even, 2: twice its share)")
    replicas_lost: list[dict[str, Any]] = Field([], description="replicas lost during the run: when each was lost "
                                                                "(and came back), the requests that failed in its "
                                                                "outage, how long the router kept sending to it and "
                                                                "until the client's success rate recovered")
    faults: list[dict[str, Any]] = Field([], description="faults made in an embedded fleet (--fault-at): each "
                                                         "as asked and done (faults.json), the requests not "
                                                         "served (not_served: failed or refused) and those "
                                                         "outside the SLOs until the next fault or "
                                                         "the end, when the SLOs held again, the router's retries "
                                                         "and the faulted replica's circuit breaker")
    stages: list[Stage] = Field([], description="the same figures for each stage of a load shape, with its name, "
                                                "level, unit, start and end")
    slo: list[dict[str, Any]] = Field([], description="each SLO's verdict: name, limit, measured, passed")

    def objectives(self) -> list[SLO]:
        """The SLOs the run was judged by, as its verdicts name them: a report recomputes what they decide
        (goodput, a recovery) from the records."""
        return [SLO(v["name"], float(v["limit"])) for v in self.slo]
