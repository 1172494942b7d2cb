"""The capacity search's options: one model for `loadwatch capacity`'s command line (generated from
it), the experiment file's `load: {capacity: ...}` and the search itself, with one set of defaults
and one set of checks."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from loadwatch.durations import Seconds


class CapacityOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["rate", "users"] = Field("rate", description="open-loop request rate (arrivals at random, as "
                                                               "vllm bench serve sends them) or closed-loop users")
    start: float | None = Field(None, gt=0, description="first level; default 2 users, or the rate that completes the "
                                                      "requests its tightest percentile SLO needs within a level "
                                                      "(1 req/s at least)")
    level_duration: Seconds = Field(30.0, gt=0, description="load per level, e.g. 30s, 2m")
    warmup: Seconds = Field(5.0, ge=0, description="start of each level left out of its figures")
    max_duration: Seconds = Field(1200.0, gt=0, description="the search stops after this")
    cool_down: Seconds = Field(10.0, ge=0, description="pause between levels: the engine drains its queue, its "
                                                       "counters are read undisturbed")
    precision: float = Field(0.1, gt=0, lt=1, description="rate mode: the knee is found when the broken level is "
                                                          "within this share of the held one; users mode: within "
                                                          "one user")
    headroom: float = Field(0.8, gt=0, le=1, description="operating point as a share of the knee")
    max_num_seqs: int | None = Field(None, gt=0, description="the target's --max-num-seqs, which vLLM does not "
                                                             "export: tells a full batch from a full token budget; "
                                                             "default: the embedded engine's own, else inferred "
                                                             "from a running batch that stops growing")

    @property
    def unit(self) -> str:
        return "users" if self.mode == "users" else "req/s"
