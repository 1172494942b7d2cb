"""The run as one Locust process sees it: identity, phase, stage and what it measured.

The master or local runner holds the run's own state. A worker holds a replica: its recorder
keeps only what was measured since its last report, and the schedule's start comes from the
master's message, since only the master knows when the warm-up ended.
"""

from __future__ import annotations

import secrets
from collections import Counter
from datetime import UTC, datetime
from enum import Enum
from time import monotonic, time

from gevent.event import Event

from loadwatch.credentials import redact_url
from loadwatch.loadgen.clocks import Clocks
from loadwatch.loadgen.recorder import Recorder
from loadwatch.loadgen.sending.schedule import Stage, stage_at
from loadwatch.loadgen.workers import Workers


def new_run_id(name: str = "") -> str:
    """`NAME-20261123T031450Z-1a2b3c`: the time orders runs, the random tail keeps them apart."""
    return (f"{name}-" if name else "") + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


class Phase(Enum):
    IDLE = "idle"
    RUNNING = "running"
    STOPPING = "stopping"  # --num-requests reached; Locust is stopping the users
    STOPPED = "stopped"


class RunState:
    def __init__(self, scenarios: list[str], target: str, replica: bool = False) -> None:
        self.scenarios = scenarios
        self.target = redact_url(target)  # the run_info label and the results: never its credentials
        self.replica = replica
        self.run_id = new_run_id()
        self.users: int | None = None  # Locust's user count as the run started (-u, or the web UI's)
        self.phase = Phase.IDLE
        self.recorder = Recorder()
        self.worker_in_flight: dict[str, list] = {}
        self.workers = Workers()  # the master's account of each, and the lost ones
        self.clocks = Clocks()  # each worker's clock against the master's (kept across runs)
        self.warmup_requests = 0
        self.warmup_until = 0.0
        self.warmup_seconds = 0.0
        self.started_at = 0.0
        self.finals_pending: set[str] = set()
        self.finals_done = Event()
        self.schedule: list[Stage] = []  # the load shape's, set by it as each run starts
        self.unit = "users"  # of the schedule's levels: users, or requests/s in an open loop
        self.load_start: float | None = None  # wall clock: when the warm-up was over
        self.stopped_at: float | None = None
        self.default_stage = "load"  # the stage of a run without a shape (--stage-name)
        self.run_name = ""  # the start of each run_id (--run-name)

    def start(self, target: str, warmup_requests: int, warmup_seconds: float, users: int | None = None) -> None:
        # Prometheus series stay monotonic across runs of one process; the summary starts afresh.
        self.users = users
        self.target = redact_url(target)
        self.run_id = new_run_id(self.run_name)
        self.phase = Phase.RUNNING
        self.recorder.start_run()
        self.warmup_requests = warmup_requests
        self.warmup_until = monotonic() + warmup_seconds
        self.started_at = time()
        self.warmup_seconds = warmup_seconds
        self.load_start = None if warmup_requests or warmup_seconds else self.started_at
        self.stopped_at = None
        self.workers.reset()

    def start_replica(self, schedule: list[Stage]) -> None:
        """A worker's run starts: the open loop's schedule, its clock unknown until the master says."""
        self.phase = Phase.RUNNING
        self.schedule = schedule
        self.load_start = None

    def follow(self, load_start: float) -> None:
        """A worker: the master says when the schedule's clock started."""
        self.load_start = load_start

    def plan(self, schedule: list[Stage], unit: str) -> None:
        """The load shape's schedule for the run that starts, in users or requests/s."""
        self.schedule = schedule
        self.unit = unit

    def stop(self) -> None:
        self.phase = Phase.STOPPED
        self.stopped_at = time()

    def load_started(self) -> float | None:
        """When the measured load began, once the warm-up is over: a known time after a timed
        warm-up, the moment it was seen after a counted one (on a master, at a worker's report)."""
        if self.replica:
            return self.load_start
        if self.load_start is None and self.phase is Phase.RUNNING:
            counted_left = self.recorder.warmup_finished < self.warmup_requests
            if not counted_left and monotonic() >= self.warmup_until:
                self.load_start = time() if self.warmup_requests else self.started_at + self.warmup_seconds
        return self.load_start

    def current(self) -> tuple[Stage, float] | None:
        """The load shape's stage running now and its level; None outside the schedule."""
        start = self.load_started()
        if start is None or not self.schedule:
            return None
        return stage_at(self.schedule, time() - start)

    def stage_of(self, started_at: float) -> str:
        """The load-shape stage a request sent at `started_at` belongs to, as stages() bounds them
        (the last one runs to the stop); `load` without a shape."""
        if not self.schedule:
            return self.default_stage
        start = self.load_started()
        elapsed = 0.0 if start is None else started_at - start
        for stage in self.schedule[:-1]:
            if elapsed < stage.duration:
                return stage.name
            elapsed -= stage.duration
        return self.schedule[-1].name

    @property
    def stage(self) -> str:
        """`warmup` until the warm-up is over, then the load shape's stage or `load`; `idle`,
        `stopping` and `stopped` around a run."""
        if self.phase is not Phase.RUNNING:
            return self.phase.value
        if self.load_started() is None:
            return "warmup"
        if not self.schedule:
            return self.default_stage
        now = self.current()
        return now[0].name if now else "stopping"  # the shape is over; Locust stops within a second

    def stages(self) -> list[dict]:
        """The schedule's stages this run reached, with wall-clock bounds cut at the stop."""
        out: list[dict] = []
        begin = self.load_start
        if begin is None:
            return out
        end_of_run = self.stopped_at or time()
        for i, stage in enumerate(self.schedule):
            if begin >= end_of_run:
                break
            # The last stage keeps what was sent before Locust stopped, up to a shape tick after its end.
            end = end_of_run if i == len(self.schedule) - 1 else min(begin + stage.duration, end_of_run)
            out.append({"name": stage.name, "level": stage.level, "unit": self.unit, "start": begin, "end": end})
            begin = end
        return out

    def in_flight(self) -> Counter[tuple[str, ...]]:
        total = Counter(self.recorder.in_flight)
        for entries in self.worker_in_flight.values():
            for labels, n in entries:
                total[tuple(labels)] += n
        return total

    def expect_final_reports(self, workers: set[str]) -> None:
        self.finals_pending = set(workers)
        self.finals_done.clear()
        self.workers.stopping = True

    def _on_the_masters_clock(self, client_id: str, report: dict) -> None:
        self.clocks.correct(client_id, report["records"])
        self.clocks.correct(client_id, report["slow"])

    def on_final_report(self, client_id: str, report: dict) -> None:
        self._on_the_masters_clock(client_id, report)
        self.recorder.merge(report)
        self.worker_in_flight[client_id] = report["in_flight"]
        self.workers.reported(client_id, report, time())
        self.finals_pending.discard(client_id)
        if not self.finals_pending:
            self.finals_done.set()

    def on_worker_report(self, client_id: str, data: dict, **_kwargs) -> None:
        report = data.get("loadwatch")
        if report is None:
            return
        self._on_the_masters_clock(client_id, report)
        self.recorder.merge(report)
        self.worker_in_flight[client_id] = report["in_flight"]
        self.workers.reported(client_id, report, time())
