"""The options that several commands share (`--target`, `--slo`, `--locustfile`, `--out`), each declared
once, with one help text: `up`, `run`, `capacity`, `tune` and `experiment` take those they need from
this model (model_options generates them), so that an option means the same wherever it is given.

The model also checks them where the command line is read: an SLO becomes its objective there, so that
a bad one is refused in one line, exit code 2, before any process starts, not once a stack is up."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from loadwatch import assets
from loadwatch.metrics.slo import Objective


class SharedOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    target: str | None = Field(None, description="base URL of an OpenAI-compatible server (a vLLM, or a fleet's "
                                                 "router); default: the embedded engine")
    slo: list[Objective] = Field([], description="a service-level objective, repeatable: "
                                                 "(ttft|tpot|itl|e2el)_(mean|median|pNN)_ms=MS, failure_ratio=R or "
                                                 "rejected_ratio=R, "
                                                 "e.g. ttft_p99_ms=500: what run judges, the limits capacity and "
                                                 "tune search within")
    locustfile: Path = Field(default_factory=assets.locustfile,
                             description="the scenario Locust runs; default the shipped chat scenario (`loadwatch "
                                         "locustfile` prints its path)")
    out: Path = Field(Path("runs"), description="the folder the command's own folder is made in: a run's, a "
                                                "search's, an experiment's")
