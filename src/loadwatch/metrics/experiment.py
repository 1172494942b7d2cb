"""An experiment's summary.json as one typed model: each arm's figures per workload and level, each
arm against the baseline, each capacity search and each cell, written and read through
`ExperimentSummary` (the experiment writes it beside summary.md). Beside capacity.py, below every
layer that reads it. The keys are those the experiment wrote before the model; `schema_version` is 1
for them, and a file without it reads as 1."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from loadwatch.metrics.document import Document, unset

SCHEMA_VERSION = 1  # the keys as written before the model: a file without schema_version is this one



class EngineFigures(BaseModel):
    """What the engine did over a group's runs (their report.json's engine figures)."""

    model_config = ConfigDict(extra="allow")

    prefix_cache_hit_ratio: float | None = Field(None, description="the runs' mean prefix-cache hit ratio, 0 to 1")
    kv_cache_usage_peak: float | None = Field(None, description="the highest KV cache usage peak of the runs, 0 to 1")
    preemptions: float | None = Field(None, description="the runs' mean preemptions")
    requests_waiting_peak: float | None = Field(None, description="the highest peak of requests waiting")


class Group(BaseModel):
    """One arm x workload x level: its runs and their mean figures."""

    model_config = ConfigDict(extra="allow")

    arm: str = Field(description="the arm's name")
    workload: str = Field(description="the workload's name")
    level: float = Field(description="the load, in unit")
    unit: str = Field(description="users or req/s")
    folder: str = Field(description="its runs' folder, under the experiment's")
    runs: list[str] = Field([], description="the results file of each run its figures are the mean of")
    failed_cells: int = Field(0, description="its runs that produced no results")
    short_cells: int = Field(0, description="its runs that completed too few requests to judge, left out")
    engine_missing: str | None = Field(None, exclude_if=unset, description="why the engine's figures are missing, "
                                                                            "where a run's report said")
    problem: str | None = Field(None, exclude_if=unset, description="why its runs could not be read together, "
                                                                     "where they could not")
    figures: dict[str, float | None] = Field({}, description="the mean over its runs of each figure of the summary's "
                                                             "table (results.json's keys); null where a run lacks it")
    engine: EngineFigures = Field(description="prefix_cache_hit_ratio, kv_cache_usage_peak, preemptions, "
                                              "requests_waiting_peak")


class Row(BaseModel):
    """One metric of an arm against the baseline arm on the same workload and level."""

    model_config = ConfigDict(extra="allow")

    arm: str = Field(description="the arm")
    base: str | None = Field(description="the baseline arm")
    workload: str = Field(description="the workload")
    level: float = Field(description="the load, in unit")
    unit: str = Field(description="users or req/s")
    metric: str = Field(description="the figure compared (results.json's key)")
    base_value: float | None = Field(None, description="the baseline's")
    value: float | None = Field(None, description="the arm's")
    change_pct: float | None = Field(None, description="the change, %")
    ci_low: float | None = Field(None, description="its 95 % interval's low end, %")
    ci_high: float | None = Field(None, description="its 95 % interval's high end, %")
    verdict: str | None = Field(None, description="better, worse or same; null without an interval")
    method: str | None = Field(None, description="how the interval was found (over runs, or over requests)")


class ArmCapacity(BaseModel):
    """An arm and workload's capacity search: capacity.json's conclusion."""

    model_config = ConfigDict(extra="allow")

    arm: str = Field(description="the arm")
    workload: str = Field(description="the workload")
    folder: str = Field(description="the search's folder, under the experiment's")
    unit: str = Field(description="users or req/s")
    max_sustainable: float | None = Field(description="capacity.json's: the knee; null where no level held")
    undecided: str | None = Field(None, description="why the knee was not located; null where it was")
    recommended: float | None = Field(None, description="the operating point")
    output_throughput_at_max: float | None = Field(None, description="output tokens a second at the knee")
    limit: str | None = Field(None, description="the limit that binds")
    limit_explained: str = Field("", description="the limit in words")


class CellRun(BaseModel):
    """One cell: a run (or a capacity search) of an arm on a workload at a level."""

    model_config = ConfigDict(extra="allow")

    folder: str = Field(description="its folder, under the experiment's")
    arm: str = Field(description="the arm")
    workload: str = Field(description="the workload")
    level: float = Field(description="the load, in unit")
    unit: str = Field(description="users or req/s")
    repeat: int = Field(description="which run of the group, from 1")
    results: str | None = Field(None, description="its results file; null where it produced none")
    problem: str | None = Field(None, description="why it did not finish")
    too_few: str | None = Field(None, description="why its figures were left out: too few requests")


class ExperimentSummary(Document):
    """summary.json: the experiment's groups, verdicts, capacity searches and cells."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = Field(SCHEMA_VERSION, description="the file's layout: 1 (a file without it is 1)")
    name: str = Field(description="the experiment's name")
    baseline: str | None = Field(description="the arm the others are compared with")
    repeats: int = Field(description="runs of each cell")
    groups: list[Group] = Field([], description="one per arm x workload x level: its runs and mean figures")
    rows: list[Row] = Field([], description="each arm against the baseline, metric by metric")
    capacity: list[ArmCapacity] = Field([], description="each arm and workload's capacity search, where the "
                                                        "experiment's load is a capacity search")
    notes: list[str] = Field([], description="what the summary's notes say: cells left out and why")
    pareto: str | None = Field(None, description="the Pareto plot's file, with several load levels")
    cells: list[CellRun] = Field([], description="every cell run")
