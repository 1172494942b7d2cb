"""capacity.json as one typed model: what `loadwatch capacity`'s search concludes, written and read
through `Capacity` (capacity's search writes it; tune, experiment and explain read it). Beside
results.py, below every layer that reads it. The keys are those the search wrote before the model;
`schema_version` is 1 for them, and a file without it reads as 1."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from loadwatch.metrics.document import Document

SCHEMA_VERSION = 1  # the keys as written before the model: a file without schema_version is this one


class CapacityLevel(BaseModel):
    """One level of the search, as capacity.json's `levels` holds it (capacity.levels.Level.as_dict)."""

    model_config = ConfigDict(extra="allow")

    level: float = Field(description="the load of the level, in the search's unit")
    unit: str = Field(description="req/s or users")
    name: str = Field(description="its name (level-01, ...): its files in the run folder's levels/ carry it")
    passed: bool = Field(description="whether it held every SLO, judged and not stopped early")
    stopped_early: str | None = Field(None, description="why it was stopped once clearly lost; null where it ran out")
    verdict: str = Field("", description="in words: held, held by refusing a share of its requests (as a "
                                         "rejected_ratio SLO allows), or broke and why")
    problem: str | None = Field(None, description="why it could not be judged (no results, too few requests)")
    start: float = Field(0.0, description="when its measured window began, after its warm-up (Unix time, seconds)")
    end: float = Field(0.0, description="when it ended (Unix time, seconds)")
    slo: list[dict[str, Any]] = Field([], description="each SLO's verdict at the level: name, limit, measured, passed")
    saturated: dict[str, str] = Field({}, description="Locust process -> why it was a bottleneck at the level")
    client: dict[str, Any] = Field({}, description="the load generator's figures (results.json's keys: throughputs, "
                                                   "latency statistics in ms, cost)")
    engine: dict[str, Any] = Field({}, description="the engine's figures over its window (peaks of KV cache usage, "
                                                   "running and waiting requests, ...)")
    ttft_split: dict[str, Any] | None = Field(None, description="its requests' TTFT split by the engine's own account "
                                                                "(queue, prefill, ...), where the records carry it")
    sure: str | None = Field(None, description="held, broke or in doubt, from its SLOs' 95 % intervals; null: unjudged")
    slo_intervals: list[dict[str, Any]] = Field([], description="each SLO's 95 % interval from the level's own "
                                                                "requests: name, ci_low, ci_high, verdict")


class Missed(BaseModel):
    """Something the run missed that the engine or router could have done."""

    model_config = ConfigDict(extra="allow")

    item: str = Field(description="prefix_cache or prefix_aware_routing")
    explanation: str = Field(description="what was missed and why, in words")
    evidence: dict[str, Any] = Field({}, description="the figures it was read from (routing_reason, ...)")


class Plateau(BaseModel):
    model_config = ConfigDict(extra="allow")

    level: float = Field(description="the lowest level that served 95 % of the most requests a second any level did")
    request_throughput: float = Field(description="what it served, req/s")
    most_request_throughput: float = Field(description="the most any level served, req/s")


class NextStep(BaseModel):
    why: str = Field(description="what the command is for")
    command: str = Field(description="the command line")


class Probe(BaseModel):
    """The engine alone before the search (capacity.probe): one user on a fixed workload."""

    model_config = ConfigDict(extra="allow")

    requests: int = Field(description="the requests it completed")
    prompt_tokens: float = Field(description="their mean prompt tokens")
    ttft_ms: float = Field(description="their median TTFT, ms")
    tpot_ms: float = Field(description="their median TPOT, ms")
    prefill_ms_per_token: float = Field(description="ttft_ms over prompt_tokens")
    request_throughput: float | None = Field(None, description="requests a second it served")


class Scaling(BaseModel):
    """Capacity against replicas (--scaling): one replica's search and the fleet's."""

    model_config = ConfigDict(extra="allow")

    capacity: dict[str, float | None] = Field(description="replicas (\"1\" and the fleet's count) -> "
                                                          "max_sustainable; null where none held")
    replicas: int = Field(description="the fleet's replicas")
    efficiency: float | None = Field(description="the fleet's capacity over replicas times one replica's; null "
                                                 "where a search held no level")
    one_replica_limit: str | None = Field(description="the limit one replica's search named")
    one_replica_folder: str = Field(description="one replica's search, in the run folder")

    @property
    def alone(self) -> float | None:
        """One replica's capacity."""
        return self.capacity.get("1")

    @property
    def fleet(self) -> float | None:
        """The fleet's capacity."""
        return self.capacity.get(str(self.replicas))


class Autoscaling(BaseModel):
    """The autoscaling rule read at the knee (capacity.autoscale.rule)."""

    model_config = ConfigDict(extra="allow")

    signal: str = Field(description="what to scale on, in words")
    metric: str = Field(description="the HPA's Pods metric, as prometheus-adapter serves it")
    query: str = Field(description="the fleet-wide PromQL KEDA reads")
    threshold: float = Field(description="the signal's mean per replica over held_level")
    per_replica: bool = Field(description="true: a sum over the replicas, divided by their count (AverageValue)")
    held_level: float = Field(description="the highest level that held its SLOs, where the threshold was read")
    broken_level: float | None = Field(None, description="the level above it that broke; null where none ran")
    at_broken_level: float | None = Field(None, description="the signal there; null where not measured")
    separates: bool = Field(False, description="whether the signal at the broken level was well above the threshold")
    replicas_measured: int = Field(1, description="the replicas the signal was measured over")


class Capacity(Document):
    """capacity.json: the knee of a capacity search, the limit that binds at it and its evidence."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = Field(SCHEMA_VERSION, description="the file's layout: 1 (a file without it is 1)")
    mode: str = Field(description="rate (an open loop, req/s) or users (a closed loop)")
    unit: str = Field(description="the unit of every load in the file: req/s or users")
    max_sustainable: float | None = Field(description="the most load that held every SLO (the knee); null where no "
                                                      "level held")
    undecided: str | None = Field(None, description="why the search stopped before it located the knee; null where "
                                                    "it did")
    recommended: float | None = Field(None, description="the operating point: max_sustainable times headroom, in the "
                                                        "unit")
    headroom: float = Field(0.8, description="the share of max_sustainable recommended (--headroom)")
    request_throughput_at_max: float | None = Field(None, description="requests a second served at the knee")
    output_throughput_at_max: float | None = Field(None, description="output tokens a second served at the knee")
    rejected_ratio_at_max: float | None = Field(None, description="the share of its requests the server refused at "
                                                                  "the knee: 0 where it held outright, above 0 where "
                                                                  "it held by refusing them (as a rejected_ratio SLO "
                                                                  "allows); null where no level held")
    price_per_hour: float | None = Field(None, description="the server's cost, $ an hour; null without "
                                                           "--price-per-hour")
    cost_level: float | None = Field(None, description="the held level nearest at or below the operating point, "
                                                       "where the cost is quoted (in the unit)")
    cost_per_million_output_tokens: float | None = Field(None, description="$ per million output tokens at cost_level")
    cost_per_million_total_tokens: float | None = Field(None, description="$ per million prompt and output tokens at "
                                                                          "cost_level")
    cost_per_million_output_tokens_at_max: float | None = Field(None, description="$ per million output tokens at "
                                                                                  "the knee")
    decisive_level: str | None = Field(None, description="the name of the level the limit was read at: the lowest "
                                                         "that broke above the knee, else the highest run")
    limit: str | None = Field(None, description="the limit that binds (batch_slots, kv_cache, replicas, "
                                                "outside_engine, slo_only, ...)")
    limit_explained: str = Field("", description="the limit in words")
    evidence: dict[str, Any] = Field({}, description="the figures the limit was read from (open-ended: each limit "
                                                     "names its own; `replicas` per replica in a fleet)")
    room: str | None = Field(None, description="how many requests the KV cache holds at the workload's mean context, "
                                               "in words; null where not known")
    missed: list[Missed] = Field([], description="what the run missed that the engine or router could have done: "
                                                 "item, explanation, evidence")
    level_rule: str = Field("", description="how each level was run and judged, in words")
    overload: dict[str, Any] | None = Field(None, description="past the knee, where the server queued without "
                                                              "refusing: the queue's and the running batch's peaks, "
                                                              "the TTFT p99, and the --max-num-queued-tokens that "
                                                              "would refuse the excess (max_num_queued_tokens: the "
                                                              "TTFT SLO times prompt_tokens_per_second), with its "
                                                              "explanation; null otherwise")
    throughput_plateau: Plateau | None = Field(None, description="where throughput stopped growing: level, "
                                                                 "request_throughput, most_request_throughput (req/s)"
                                                                 "; null under two levels served")
    decode_unbounded: bool = Field(False, description="true where the SLOs bound no TPOT, ITL or end-to-end latency")
    levels: list[CapacityLevel] = Field([], description="every level run, in order: level, unit, name, passed, "
                                                        "stopped_early, problem, start, end, slo, saturated, client, "
                                                        "engine, ttft_split, sure, slo_intervals")
    scaling: Scaling | None = Field(None, description="--scaling: capacity against replicas (`capacity`: "
                                                      "replicas -> max_sustainable), replicas, efficiency, "
                                                      "one_replica_limit, one_replica_folder; null otherwise")
    probe: Probe | None = Field(None, description="the engine alone before the search (1 user): requests, "
                                                  "prompt_tokens, ttft_ms, tpot_ms, prefill_ms_per_token, "
                                                  "request_throughput; null where not probed")
    max_sustainable_interval: list[float | None] = Field([None, None], description="[low, high]: the 95 % interval "
                                                                                   "of the load sustained, from the "
                                                                                   "levels' own requests (in the "
                                                                                   "unit)")
    rerun_interval: list[float | None] | None = Field(None, description="[low, high]: where a second search on an "
                                                                        "engine whose probe agrees may hold; null "
                                                                        "without a probe")
    autoscaling: Autoscaling | None = Field(None, description="the autoscaling rule read at the knee: signal, "
                                                              "metric, query, threshold, per_replica, held_level, "
                                                              "broken_level, at_broken_level, separates, "
                                                              "replicas_measured; null where none")
    next: list[NextStep] = Field([], description="the commands that go on from the result: why, command")
