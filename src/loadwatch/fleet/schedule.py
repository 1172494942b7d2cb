"""`loadwatch run --scale-at TIME=N`: the fleet's replica count changed at given times into the load,
as an autoscaler would change it, so that the report shows how long the SLOs took to hold again.
Each change is noted (when asked, when the router listed the replicas) in the run folder's
scaling.json, which the report reads beside the run's records (report/scaling.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from loadwatch.atomic import write_atomically
from loadwatch.durations import parse_duration
from loadwatch.fleet.scale import ScaleError, Scaler

SCALING = "scaling.json"  # in the run folder


def parse_plan(items: list[str]) -> list[tuple[float, int]]:
    """TIME=N items (30s=2, 2m=1), in time order; ValueError naming the bad one."""
    plan = []
    for item in items:
        when, sep, count = item.partition("=")
        try:
            at, replicas = parse_duration(when), int(count)
        except ValueError:
            at, replicas = -1.0, 0
        if not sep or at < 0 or replicas < 1:
            raise ValueError(f"--scale-at {item!r} is not TIME=N (a time into the load and a replica count of 1 or "
                             "more, e.g. 60s=2)")
        plan.append((at, replicas))
    return sorted(plan)


class Schedule:
    """The plan's changes at time 0 at once (the load starts on them), the later ones in a thread
    timed from `begin()`. A change the fleet refuses is noted and said; the run goes on."""

    def __init__(self, scaler: Scaler, plan: list[tuple[float, int]], say):
        self.scaler, self.plan, self.say = scaler, plan, say
        self.events: list[dict] = []
        self.started_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._later, name="scale-at", daemon=True)

    def begin(self) -> None:
        """Apply the changes due at 0, then time the rest from now: call it as the load starts."""
        self.started_at = time.time()
        for at, replicas in self.plan:
            if at == 0:
                self._change(at, replicas)
        self._thread.start()

    def end(self, run_dir: Path) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        write_atomically(run_dir / SCALING, json.dumps({"started_at": self.started_at, "events": self.events},
                                                       indent=2) + "\n")

    def _later(self) -> None:
        for at, replicas in self.plan:
            if at > 0 and not self._stop.wait(max(0.0, self.started_at + at - time.time())):
                self._change(at, replicas)

    def _change(self, at: float, replicas: int) -> None:
        asked = time.time()
        event: dict = {"at_s": at, "replicas": replicas, "asked": asked, "ready_s": None, "error": None}
        try:
            self.scaler.scale_to(replicas, self.say)
            event["ready_s"] = round(time.time() - asked, 3)
        except ScaleError as exc:
            event["error"] = str(exc)
            self.say(f"warning: --scale-at {at:g}s={replicas}: {exc}")
        self.events.append(event)
