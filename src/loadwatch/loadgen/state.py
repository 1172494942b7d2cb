"""The run as the master or local runner sees it: identity, stage and everything measured."""

from __future__ import annotations

import secrets
from collections import Counter
from datetime import UTC, datetime

from loadwatch.loadgen.recorder import Recorder


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


class RunState:
    def __init__(self, scenarios: list[str], target: str) -> None:
        self.scenarios = scenarios
        self.target = target
        self.run_id = new_run_id()
        self.stage = "idle"
        self.recorder = Recorder()
        self.worker_in_flight: dict[str, list] = {}

    def start(self, target: str) -> None:
        # Prometheus series stay monotonic across runs of one process; the summary starts afresh.
        self.target = target
        self.run_id = new_run_id()
        self.stage = "load"
        self.recorder.samples.clear()

    def in_flight(self) -> Counter[tuple[str, ...]]:
        total = Counter(self.recorder.in_flight)
        for entries in self.worker_in_flight.values():
            for labels, n in entries:
                total[tuple(labels)] += n
        return total

    def on_worker_report(self, client_id: str, data: dict, **_kwargs) -> None:
        report = data.get("loadwatch")
        if report is None:
            return
        self.recorder.merge(report)
        self.worker_in_flight[client_id] = report["in_flight"]
