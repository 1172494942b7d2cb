"""A headless Locust run: its command line built from the load it applies, and the one policy for
stopping it.

`loadwatch run`, each capacity level and each experiment cell is one of these. Locust's host goes in
LOCUST_HOST, never in argv: a target's credentials are for Locust (a Basic header), not for `ps`.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, Field

from loadwatch.interrupts import held, raise_if_interrupted
from loadwatch.metrics.slo import SLO
from loadwatch.settings import partial_beside

INTERRUPTED = 130  # as a shell reports a command ended by Ctrl-C
OPEN_LOOP_USERS = 16  # arrival processes sharing an open-loop rate (each sends without waiting)
WRITE_GRACE = 30.0  # seconds Locust gets, beyond its --stop-timeout, to write what it measured
KILL_GRACE = 10.0
INTERRUPT_CHECK = 0.5  # seconds between looks for an interrupt a fork dropped, while Locust runs
# A run that must complete some requests to be judged (a capacity level, an experiment cell) goes on
# past its length, up to this many times it, until it has them: a slow server's requests take longer.
MAX_STRETCH = 8
WATCH_SECONDS = 2.0  # how often such a run's figures are checkpointed and looked at
ENOUGH = "enough requests"  # the watch's reason to end a stretched run that has what it needs


class Load(BaseModel):
    """The load of one run: closed-loop users, or an open-loop rate shared by up to OPEN_LOOP_USERS."""

    users: int = Field(ge=1)
    rate: float | None = Field(None, gt=0, description="requests/s; None: a closed loop")
    spawn_rate: float | None = Field(None, gt=0, description="users started per second; default all at once")
    duration: float = Field(gt=0, description="seconds, warm-up included")
    warmup_seconds: float = Field(0.0, ge=0)
    warmup_requests: int = Field(0, ge=0)

    @classmethod
    def at(cls, value: float, unit: str, duration: float, **warmup: float) -> Load:
        """A level as the capacity search and the experiment name it: `value` users or req/s."""
        if unit == "users":
            return cls(users=int(value), duration=duration, **warmup)
        return cls(users=max(1, min(OPEN_LOOP_USERS, math.ceil(value))), rate=value, duration=duration, **warmup)

    def arguments(self) -> list[str]:
        spawn = self.spawn_rate or self.users
        return [*(["--request-rate", f"{self.rate:g}"] if self.rate else []),
                "-u", str(self.users), "-r", f"{spawn:g}", "-t", f"{math.ceil(self.duration)}s",
                *(["--warmup-seconds", f"{self.warmup_seconds:g}"] if self.warmup_seconds else []),
                *(["--warmup-requests", str(self.warmup_requests)] if self.warmup_requests else [])]


@dataclass
class Finished:
    code: int  # Locust's exit code, INTERRUPTED when Ctrl-C or SIGTERM stopped it
    stopped_early: str | None = None  # why `watch` stopped it


@dataclass
class LocustRun:
    locustfile: Path
    results: Path = Path("results.json")
    metrics_port: int = 0
    load: Load | None = None  # None in a template that a search or an experiment fills in per run
    slo: list[SLO] = field(default_factory=list)
    engine_metrics: str | None = None
    run_name: str | None = None
    stage_name: str | None = None
    checkpoint_interval: float | None = None
    csv_prefix: Path | None = None
    stop_timeout: float = 10.0  # seconds users get to finish their requests once the run time is over
    options: list[str] = field(default_factory=list)  # the workload's and the user's own Locust options
    # What the stack asks of every run, whatever its workload: a fleet's replicas (--replica NAME=URL).
    stack_options: list[str] = field(default_factory=list)

    def command(self) -> list[str]:
        if self.load is None:
            raise ValueError("a Locust run needs its load")
        interval = None if self.checkpoint_interval is None else f"{self.checkpoint_interval:g}"
        named = [("--engine-metrics", self.engine_metrics), ("--run-name", self.run_name),
                 ("--stage-name", self.stage_name), ("--csv", self.csv_prefix), ("--checkpoint-interval", interval)]
        return [sys.executable, "-m", "locust", "-f", str(self.locustfile), "--headless", "--only-summary",
                "--metrics-port", str(self.metrics_port), "--results-json", str(self.results),
                "--stop-timeout", f"{self.stop_timeout:g}", *(f"--slo={slo}" for slo in self.slo),
                *(part for flag, value in named if value is not None for part in (flag, str(value))),
                *self.load.arguments(), *self.options, *self.stack_options]

    def stretched(self) -> LocustRun:
        """This run allowed MAX_STRETCH times its load's length after the warm-up, its figures
        checkpointed for a watch that ends it once `enough`."""
        assert self.load is not None
        warmup = self.load.warmup_seconds
        longest = warmup + MAX_STRETCH * (self.load.duration - warmup)
        return replace(self, load=self.load.model_copy(update={"duration": longest}),
                       checkpoint_interval=WATCH_SECONDS)

    def figures(self, partial: bool = False) -> dict | None:
        """The results Locust wrote (with `partial`, the checkpoint a run with --checkpoint-interval
        keeps up to date), None where there are none that read."""
        try:
            return json.loads((partial_beside(self.results) if partial else self.results).read_text())
        except (OSError, ValueError):
            return None

    def run(self, target: str, log: Path | None = None, say: Callable[[str], None] = print,
            watch: Callable[[], str | None] | None = None, watch_every: float = 2.0) -> Finished:
        """Run Locust to its end. `watch`, asked every `watch_every` seconds, may name a reason to
        stop: Locust then gets SIGTERM (its own quit, which writes what it measured).

        Ctrl-C (or SIGTERM to loadwatch, turned into KeyboardInterrupt) stops the run the one way:
        Locust gets SIGINT and `stop_timeout` + WRITE_GRACE seconds to let its requests finish and
        write its results; a second Ctrl-C, or that time passing, ends it (SIGTERM, then SIGKILL).
        The run is then INTERRUPTED: the caller keeps what was written and decides what comes next.
        """
        out = open(log, "w") if log else None  # noqa: SIM115 (closed below, after Locust's last line)
        locust: subprocess.Popen | None = None
        try:
            with held():
                # A process group of its own: Ctrl-C at a terminal reaches loadwatch alone, which passes
                # one SIGINT on. Reaching both, Locust got two, and the second cut its stop short.
                locust = subprocess.Popen(self.command(), env={**os.environ, "LOCUST_HOST": target},
                                          stdout=out, stderr=subprocess.STDOUT if out else None,
                                          preexec_fn=_interruptible, process_group=0)
            return self._wait(locust, watch, watch_every)
        except KeyboardInterrupt:
            if locust is None:  # before it started
                return Finished(INTERRUPTED)
            say("interrupted: letting Locust finish its requests and write the results (Ctrl-C again to cut it short)")
            if not self._stop(locust):
                say("Locust was stopped before it finished: its results may be missing")
            return Finished(INTERRUPTED)
        finally:
            # Any other way out (an error of loadwatch's own, a closed stdout) leaves no Locust behind:
            # a tune whose output pipe was closed mid-trial exited with its Locust sending on, orphaned.
            if locust is not None and locust.poll() is None:
                locust.kill()
                locust.wait()
            if out:
                out.close()

    @staticmethod
    def _wait(locust: subprocess.Popen, watch: Callable[[], str | None] | None, every: float) -> Finished:
        stopped_early = None
        while True:
            raise_if_interrupted()  # one a fork's callbacks dropped (loadwatch.interrupts)
            try:
                return Finished(locust.wait(timeout=every if watch is not None else INTERRUPT_CHECK), stopped_early)
            except subprocess.TimeoutExpired:
                if watch is not None and stopped_early is None and (stopped_early := watch()):
                    locust.send_signal(signal.SIGTERM)

    def _stop(self, locust: subprocess.Popen) -> bool:
        """Whether Locust ended by itself within its grace."""
        try:
            if locust.poll() is None:
                locust.send_signal(signal.SIGINT)
            locust.wait(timeout=self.stop_timeout + WRITE_GRACE)
            return True
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            locust.terminate()
            try:
                locust.wait(timeout=KILL_GRACE)
            except subprocess.TimeoutExpired:
                locust.kill()
                locust.wait()
            return False


def enough(partial: dict, began: float, seconds: float, needed: int) -> bool:
    """Whether a stretched run begun at `began` (time.time()) has run its `seconds` and completed the
    `needed` requests, by its checkpoint `partial`."""
    return time.time() - began >= seconds and partial.get("completed", 0) >= needed


def _interruptible() -> None:
    """In Locust's process before it starts: SIGINT, the graceful stop sent to it, at its default. A
    process started in the background of a script (CI's, say) inherits SIGINT ignored, and Locust then
    ran its whole time through every stop."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
