"""tune.json as one typed model: what `loadwatch tune` did, step by step (DESIGN.md's contract),
written and read through `Tune` (tune writes it after every step; its report and the benchmarks read
it). Beside capacity.py, below every layer that reads it. The keys are those tune wrote before the
model; `schema_version` is 1 for them, and a file without it reads as 1."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.document import Document, unset

SCHEMA_VERSION = 1  # the keys as written before the model: a file without schema_version is this one



class Measured(BaseModel):
    """A capacity as tune.json carries it: capacity.json's knee, in its unit."""

    model_config = ConfigDict(extra="allow")

    max_sustainable: float | None = Field(description="capacity.json's max_sustainable; null where no level held")
    unit: str = Field(description="req/s or users")
    undecided: str | None = Field(None, description="why its search did not locate the knee; null where it did")
    cost_per_million_output_tokens: float | None = Field(None, description="$ per million output tokens at the "
                                                                           "operating point, with --price-per-hour")

    @classmethod
    def of(cls, result: Capacity | None) -> Measured | None:
        return None if result is None else cls.model_validate(result.model_dump(include=set(cls.model_fields)))


class Gain(BaseModel):
    """A lever's change in one metric over the trial's rounds, with its 95 % interval (percent)."""

    model_config = ConfigDict(extra="allow")

    metric: str = Field(description="the metric: request_goodput for the verdict's, the SLO's for slo_change")
    change_pct: float | None = Field(None, description="the change, %; null with too few rounds to compare")
    ci_low: float | None = Field(None, description="its 95 % interval's low end, %")
    ci_high: float | None = Field(None, description="its 95 % interval's high end, %")

    @property
    def open(self) -> bool:
        """No verdict yet: no interval, or one that spans no change."""
        return self.ci_low is None or self.ci_high is None or self.ci_low <= 0 <= self.ci_high


class FlagChange(BaseModel):
    """What a lever changes; `from` and `to` are Python words, so the fields carry them as aliases."""

    model_config = ConfigDict(extra="allow", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    flag: str = Field(description="a vLLM flag, an environment variable or a fleet's setting (--router-policy, "
                                  "--replicas)")
    before: str | None = Field(alias="from", description="its value before; null where vLLM's default applied")
    after: str = Field(alias="to", description="its value with the lever")


class Runs(BaseModel):
    model_config = ConfigDict(extra="allow")

    current: list[float] = Field([], description="the SLO metric in each round of the current configuration")
    with_change: list[float] = Field([], description="the same with the lever")
    current_goodput: list[float] = Field([], description="request_goodput in each round of the current one")
    with_change_goodput: list[float] = Field([], description="the same with the lever")


class Step(BaseModel):
    """One lever tried at one step."""

    model_config = ConfigDict(extra="allow")

    step: int = Field(description="the step, from 1")
    limit: str | None = Field(description="the limit the lever was tried for")
    evidence: dict[str, Any] = Field({}, description="capacity.json's evidence of that limit")
    change: FlagChange = Field(description="flag, from (null: vLLM's default), to")
    reason: str = Field(description="why the catalogue tries this lever for the limit")
    verdict: str = Field(description="adopted, rejected, undecided or refused")
    refused: str | None = Field(None, description="vLLM's words, where the configuration did not start")
    settle: str | None = Field(None, description="undecided only: what would settle it")
    gain: Gain = Field(description="the verdict's: metric request_goodput, change_pct, ci_low, ci_high")
    slo_change: Gain | None = Field(None, description="the same for the SLO's own metric, shown beside it")
    decided_by: str | None = Field(None, description="the metric whose interval decided: request_goodput, or the "
                                                     "SLO's metric as second witness where goodput's spans no change "
                                                     "but points the same way; null where undecided")
    capacity_after: Measured | None = Field(None, description="adopted only: the capacity measured with it")
    limit_after: str | None = Field(None, description="adopted only: the limit then; null where that search "
                                                      "located no knee")
    runs: Runs = Field(description="each round's values: current and with_change of the SLO's metric, "
                                   "current_goodput and with_change_goodput")
    probe_change: str | None = Field(None, exclude_if=unset, description="adopted only, where the engine alone "
                                                                          "moved from the baseline's probe: how")


class Side(BaseModel):
    """One arm of the admission cap's trial, pooled over its rounds."""

    model_config = ConfigDict(extra="allow")

    arm: str = Field(description="current, or the configuration with the cap")
    rounds: int = Field(description="the runs pooled")
    completed: int = Field(0, description="requests completed over them")
    failed: int = Field(0, description="requests failed")
    rejected: int = Field(0, description="requests the server refused")
    measured: float | None = Field(None, description="the SLO's statistic over the admitted requests, in ms")
    ci_low: float | None = Field(None, description="its 95 % interval's low end, from the requests (block bootstrap)")
    ci_high: float | None = Field(None, description="its high end")
    within_slo: bool | None = Field(None, description="true where the whole interval is within the SLO's limit, false "
                                                      "where it is not; null without an interval")
    rejected_ratio: float | None = Field(None, description="the share of requests refused, 0 to 1")
    rejected_ci_low: float | None = Field(None, description="its 95 % Wilson interval's low end")
    rejected_ci_high: float | None = Field(None, description="its high end")
    request_goodput: float | None = Field(None, description="the mean of the runs' request_goodput")


class Overload(BaseModel):
    """Admission control past the knee: the cap the capacity search sized, tried against the current
    configuration at the load that broke (tune/overload.py)."""

    model_config = ConfigDict(extra="allow")

    level: float = Field(description="the load of the trial: the level where the final configuration broke")
    unit: str = Field(description="req/s or users")
    changes: list[FlagChange] = Field([], description="the caps tried, each an arm of its own: flag "
                                                      "(--max-num-queued-tokens, --max-num-queued-reqs), from, to")
    metric: str = Field(description="the TTFT SLO it is judged on (ttft_p99_ms, say)")
    limit: float = Field(description="that SLO's limit, ms")
    sides: list[Side] = Field([], description="current, then each cap's arm that started")
    verdict: str = Field("", description="the trade in words")
    refused: dict[str, str] = Field({}, description="arm -> the server's words, where a capped configuration did not "
                                                    "start")


class Configuration(BaseModel):
    """A configuration tune measured: the flags, environment and fleet settings, and its capacity."""

    model_config = ConfigDict(extra="allow")

    vllm_args: list[str] = Field(description="vLLM's flags")
    env: dict[str, str] = Field({}, description="the environment levers set")
    fleet: dict[str, str] | None = Field(None, exclude_if=unset, description="a fleet's router policy and replicas, "
                                                                              "where set")
    capacity: Measured | None = Field(description="its capacity: max_sustainable, unit, undecided, "
                                                  "cost_per_million_output_tokens")
    limit: str | None = Field(description="the limit that binds; null where its search located no knee")


class Final(Configuration):
    command_line: str = Field(description="the `vllm serve` line")


class Search(BaseModel):
    name: str = Field(description="the capacity search's folder: baseline or step-N")
    seconds: float = Field(description="how long it took")


class Cost(BaseModel):
    model_config = ConfigDict(extra="allow")

    server_starts: int = Field(description="server starts, a model load each")
    seconds: float = Field(description="tune's own wall time")
    capacity_searches: list[Search] = Field([], description="each capacity search's name and seconds")


class Tune(Document):
    """tune.json: the baseline, each lever tried, the final configuration and what it all cost."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = Field(SCHEMA_VERSION, description="the file's layout: 1 (a file without it is 1)")
    budget_s: float = Field(description="the --budget, in seconds")
    baseline: Configuration | None = Field(None, description="the configuration tune started from: vllm_args, env, "
                                                             "fleet, its capacity and limit; null before it was "
                                                             "measured")
    steps: list[Step] = Field([], description="one entry per lever tried")
    final: Final | None = Field(None, description="as baseline, with command_line")
    stopped: str | None = Field(None, description="why the loop ended")
    overload: Overload | None = Field(None, exclude_if=unset, description="where the final configuration queued "
                                                                          "past its knee without refusing: the "
                                                                          "admission caps' trial (level, unit, "
                                                                          "changes, metric, limit, sides, verdict)")
    cost: Cost | None = Field(None, exclude_if=unset, description="server_starts, seconds, capacity_searches; "
                                                                   "written when tune ends")
