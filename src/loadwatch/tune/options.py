"""`loadwatch tune`'s own options, beside the capacity search's (its command line is generated from both)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from loadwatch.durations import Seconds


class TuneOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    budget: Seconds = Field(1800.0, gt=0, description="tune ends cleanly after this, every finished step written, "
                                                      "e.g. 20m")
    restart: str | None = Field(None, description="for a --target: the shell command that restarts it with new flags; "
                                                  "{vllm_args} in it becomes the flags, shell-quoted, and environment "
                                                  "levers are set in its environment")
    repeats: int = Field(3, ge=2, description="runs of each configuration a trial compares, in rounds, each on a "
                                              "fresh start of the server")
    max_steps: int | None = Field(None, gt=0, description="tune ends after this many steps, each with its capacity "
                                                          "after; default: as many as the budget allows")
    ready_timeout: Seconds = Field(600.0, gt=0, description="seconds a restarted --target may take to answer")
