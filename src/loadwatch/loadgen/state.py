"""The run as the master or local runner sees it: identity, stage and everything measured."""

from __future__ import annotations

import secrets
from collections import Counter
from datetime import UTC, datetime
from time import monotonic

from gevent.event import Event

from loadwatch.loadgen.recorder import Recorder


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


class RunState:
    def __init__(self, scenarios: list[str], target: str) -> None:
        self.scenarios = scenarios
        self.target = target
        self.run_id = new_run_id()
        self.phase = "idle"  # idle, running, stopped
        self.recorder = Recorder()
        self.worker_in_flight: dict[str, list] = {}
        self.warmup_requests = 0
        self.warmup_until = 0.0
        self.finals_pending: set[str] = set()
        self.finals_done = Event()

    def start(self, target: str, warmup_requests: int, warmup_seconds: float) -> None:
        # Prometheus series stay monotonic across runs of one process; the summary starts afresh.
        self.target = target
        self.run_id = new_run_id()
        self.phase = "running"
        self.recorder.samples.clear()
        self.recorder.finished = self.recorder.warmup_finished = 0
        self.warmup_requests = warmup_requests
        self.warmup_until = monotonic() + warmup_seconds

    @property
    def stage(self) -> str:
        """`warmup` until the warm-up is over, then `load`; `idle` and `stopped` around a run."""
        if self.phase != "running":
            return self.phase
        if self.recorder.warmup_finished < self.warmup_requests or monotonic() < self.warmup_until:
            return "warmup"
        return "load"

    def in_flight(self) -> Counter[tuple[str, ...]]:
        total = Counter(self.recorder.in_flight)
        for entries in self.worker_in_flight.values():
            for labels, n in entries:
                total[tuple(labels)] += n
        return total

    def expect_final_reports(self, workers: set[str]) -> None:
        self.finals_pending = set(workers)
        self.finals_done.clear()

    def on_final_report(self, client_id: str, report: dict) -> None:
        self.recorder.merge(report)
        self.worker_in_flight[client_id] = report["in_flight"]
        self.finals_pending.discard(client_id)
        if not self.finals_pending:
            self.finals_done.set()

    def on_worker_report(self, client_id: str, data: dict, **_kwargs) -> None:
        report = data.get("loadwatch")
        if report is None:
            return
        self.recorder.merge(report)
        self.worker_in_flight[client_id] = report["in_flight"]
