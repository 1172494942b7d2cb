"""The experiment file: arms (engine configurations) x workloads x load levels, each repeated.

Validated whole before anything starts; an error names the file, the line and the field. A
workload is a set of the load generator's own options (LoadSettings), checked by the same model
that checks them on Locust's command line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from loadwatch.capacity.options import CapacityOptions
from loadwatch.durations import Seconds
from loadwatch.engine.serving import engine_args
from loadwatch.metrics.slo import Objective
from loadwatch.settings import LoadSettings
from loadwatch.workloads.datasets import dataset_named
from loadwatch.workloads.errors import DatasetError

NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"  # names become folders and run ids
# Options the experiment sets for every cell itself (where results go, the cell's name, the load).
RESERVED = {"results_json", "requests_file", "metrics_port", "metrics_host", "run_name", "stage_name",
            "checkpoint_interval", "slo", "request_rate", "warmup_requests", "warmup_seconds", "shape", "sweep",
            "num_requests", "api_key_file"}


class ExperimentError(Exception):
    """The file cannot be read or is not a valid experiment; the message names the line and field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Arm(Strict):
    vllm_args: list[str] = Field([], description="flags of the embedded vllm serve for this arm")
    target: str | None = Field(None, description="base URL of a server instead of the embedded engine")
    restart: str | None = Field(None, description="shell command run before this arm's cells (target arms): "
                                                  "it restarts the server with the arm's configuration")
    ready_timeout: float = Field(600.0, gt=0, description="seconds the target may take to answer after restart")
    replicas: int | None = Field(None, ge=1, description="embedded vLLM replicas behind the router (--router) for "
                                                         "this arm, each with vllm_args (over the command line's "
                                                         "--replicas)")
    router_policy: str | None = Field(None, description="the embedded router's policy for this arm (round_robin, "
                                                        "power_of_two, cache_aware, ...): needs replicas here or "
                                                        "on the command line")

    @model_validator(mode="after")
    def _engine_or_target(self) -> Arm:
        if self.target and (self.vllm_args or self.replicas or self.router_policy):
            raise ValueError("vllm_args, replicas and router_policy are for the embedded engine: an arm with a "
                             "target configures its server itself (restart)")
        if self.restart and not self.target:
            raise ValueError("restart is for an arm with a target: the embedded engine restarts by itself")
        return self


class Load(Strict):
    users: list[int] = Field([4], description="closed loop: users, one level each")
    request_rate: list[float] = Field([], description="open loop instead: requests/s, one level each")
    duration: Seconds = Field(40.0, gt=0, description="seconds of each cell, warm-up included")
    warmup_requests: int = Field(0, ge=0, description="requests at the start of each cell left out of its figures")
    warmup_seconds: float = Field(0.0, ge=0, description="seconds at the start of each cell left out of its figures")
    warmup_run: Seconds = Field(10.0, ge=0, description="seconds of a run of each workload, thrown away, before "
                                                      "its first cell on each arm: the engine's first requests of "
                                                      "a new shape compile kernels, which would slow its r1")
    capacity: CapacityOptions | None = Field(None, description="a capacity search per arm and workload instead of "
                                                        "fixed levels (needs slo)")

    @field_validator("users", "request_rate", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, int | float) else value

    @field_validator("users")
    @classmethod
    def _positive_users(cls, value: list[int]) -> list[int]:
        if not value or any(v < 1 for v in value):
            raise ValueError("users must be at least 1")
        return value

    @field_validator("request_rate")
    @classmethod
    def _positive_rates(cls, value: list[float]) -> list[float]:
        if any(v <= 0 for v in value):
            raise ValueError("a request rate must be over 0")
        return value

    @property
    def levels(self) -> list[tuple[float, str]]:
        """(value, unit) of each level."""
        if self.request_rate:
            return [(v, "req/s") for v in self.request_rate]
        return [(float(v), "users") for v in self.users]


class Experiment(Strict):
    name: str = Field(pattern=NAME, description="the experiment's name: letters, digits, . _ -; its folder's")
    description: str = Field("", description="what it tests, in a line: the summary's first line")
    repeats: int = Field(3, ge=1, description="runs of each cell; the verdicts need 2 or more, 3 advised")
    arms: dict[str, Arm] = Field(min_length=1, description="name -> the server configuration it runs (below)")
    workloads: dict[str, dict[str, Any]] = Field(min_length=1, description="name -> Locust options of loadwatch's "
                                                                           "(`loadwatch options`), with _ for -: "
                                                                           "{dataset: random, input_len: 512}")
    baseline: str | None = Field(None, description="the arm the others are compared with; default the first")
    load: Load = Field(Load(), description="the levels each arm and workload run at (below)")
    slo: list[Objective] = Field([], description="as --slo: ttft_p99_ms=500, ...; each cell's verdicts, and a "
                                                 "capacity search's limits")
    cool_down: Seconds = Field(6.0, ge=0, description="seconds after each cell: the engine's counters settle "
                                                    "before its figures are read")
    reset_prefix_cache: bool = Field(True, description="empty the prefix cache before each run")

    @field_validator("arms", "workloads")
    @classmethod
    def _names(cls, value: dict) -> dict:
        for name in value:
            if not re.match(NAME, str(name)):
                raise ValueError(f"{name!r}: names are letters, digits, '.', '_' and '-' (they become folders)")
        return {name: {} if options is None else options for name, options in value.items()}

    @field_validator("baseline")
    @classmethod
    def _baseline_is_an_arm(cls, value: str | None, info: ValidationInfo) -> str | None:
        arms = info.data.get("arms")
        if value is not None and arms is not None and value not in arms:
            raise ValueError(f"{value!r} is not one of the arms: {', '.join(arms)}")
        return value

    @model_validator(mode="after")
    def _first_arm_by_default(self) -> Experiment:
        if self.baseline is None:
            self.baseline = next(iter(self.arms))
        if self.load.capacity is not None and not self.slo:
            raise ValueError("a capacity search needs at least one slo: the most load within what?")
        engine_args([], self.endpoints)  # an engine generates or embeds, not both
        return self

    @property
    def endpoints(self) -> set[str]:
        """The endpoints the workloads send to."""
        return {str(options.get("endpoint", "chat")) for options in self.workloads.values()}


class Loader(yaml.SafeLoader):
    """YAML 1.2's booleans: only true and false. An arm named `on` or `off` stays a name."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                             list("tTfF"))


def _line(node: yaml.Node, loc: tuple) -> int:
    """The line (1-based) of the deepest node of the file that `loc` reaches."""
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = next((v for k, v in node.value if k.value == str(part)), None)
            if found is None:
                found = next((k for k, _ in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            found = node.value[part]
        else:
            found = None
        if found is None:
            break
        node = found
    return node.start_mark.line + 1


def workload_problems(workloads: object) -> list[tuple[tuple, str]]:
    """(where, what) of each option of a workload that is not a valid load-generator option."""
    if not isinstance(workloads, dict):
        return []  # the model says what is wrong with it
    problems: list[tuple[tuple, str]] = []
    for name, options in workloads.items():
        if not isinstance(options, dict):
            continue
        for key in options:
            if key in RESERVED:
                problems.append(((name, key), "set by the experiment itself (its load, slo and files)"))
            elif key not in LoadSettings.model_fields:
                problems.append(((name, key), "not a load-generator option (see `locust --help`, with - as _)"))
        if problems:
            continue
        try:
            dataset_named(str(options.get("dataset", LoadSettings.model_fields["dataset"].default)))
        except DatasetError as exc:
            problems.append(((name, "dataset"), str(exc)))
        try:
            LoadSettings(**options)
        except ValidationError as exc:
            problems += [((name, *e["loc"]), e["msg"].removeprefix("Value error, ")) for e in exc.errors()]
    return [(("workloads", *where), what) for where, what in problems]


def load(path: Path, name: str | None = None) -> Experiment:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ExperimentError(f"cannot read {path}: {exc.strerror}") from None
    try:
        root = yaml.compose(text, Loader=Loader)
        data = yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{path}: not YAML: {exc}") from None
    if not isinstance(data, dict) or root is None:
        raise ExperimentError(f"{path}: an experiment is a mapping (name, arms, workloads, load, repeats)")
    data.setdefault("name", name or path.stem)
    problems = workload_problems(data.get("workloads"))
    try:
        experiment = Experiment.model_validate(data)
    except ValidationError as exc:
        problems += [(tuple(p for p in e["loc"] if not str(p).startswith("function-")),
                      e["msg"].removeprefix("Value error, ")) for e in exc.errors()]
    if problems:
        located = sorted((_line(root, loc), ".".join(map(str, loc)) or "file", what) for loc, what in problems)
        raise ExperimentError("\n".join(f"{path}:{line}: {field}: {what}" for line, field, what in located))
    return experiment

