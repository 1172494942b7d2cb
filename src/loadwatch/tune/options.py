"""`loadwatch tune`'s own options, beside the capacity search's (its command line is generated from both)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from loadwatch.durations import Seconds

EXTENSION = 3  # a trial runs at most this many times the rounds --repeats asks, while a lever is undecided


class TuneOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget: Seconds = Field(1800.0, gt=0, description="tune ends cleanly after this, every finished step written, "
                                                      "e.g. 20m")
    restart: str | None = Field(None, description="for a --target: the shell command that restarts it with new flags; "
                                                  "{vllm_args} in it becomes the flags, shell-quoted, and environment "
                                                  "levers are set in its environment")
    repeats: int = Field(3, ge=2, description="rounds a trial runs at least, each configuration once a round on a "
                                              f"fresh start of the server; up to {EXTENSION} times as many while a "
                                              "lever is undecided and the trial's share of the budget lasts")
    max_steps: int | None = Field(None, ge=0, description="tune ends after this many steps, each with its capacity "
                                                          "after (0: the baseline's alone, and the admission cap "
                                                          "past its knee); default: as many as the budget allows")
    ready_timeout: Seconds = Field(600.0, gt=0, description="seconds a restarted --target may take to answer")
