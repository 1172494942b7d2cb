"""Changes made to a fleet at given times into the load: `loadwatch run --scale-at TIME=N` (its
replica count changed, as an autoscaler would change it) and `--fault-at TIME=ACTION:REPLICA`
(fleet.faults: a replica killed, hung or refusing), so that the report shows how long the SLOs took
to hold again. Each change is noted (when asked, when it took effect) in the run folder, scaling.json
or faults.json, which the results and the report read beside the run's records (report/scaling.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from loadwatch.atomic import write_atomically
from loadwatch.durations import parse_duration

SCALING = "scaling.json"  # in the run folder
T = TypeVar("T")
# act(at, change, stopping) -> the figures of the change done, noted with its event; `stopping` is set as the
# load ends, for a change that lasts (a fault with a duration) to be undone at once.
Act = Callable[[float, T, threading.Event], dict]


def timed(option: str, item: str, form: str, example: str) -> tuple[float, str]:
    """TIME=VALUE: the seconds into the load and the value, as given; ValueError naming the bad item."""
    when, sep, value = item.partition("=")
    try:
        at = parse_duration(when)
    except ValueError:
        at = -1.0
    if not sep or at < 0 or not value:
        raise ValueError(f"{option} {item!r} is not {form} (a time into the load, then what; e.g. {example})")
    return at, value


def parse_plan(items: list[str]) -> list[tuple[float, int]]:
    """TIME=N items (30s=2, 2m=1), in time order; ValueError naming the bad one."""
    plan = []
    for item in items:
        try:
            at, count = timed("--scale-at", item, "TIME=N", "60s=2")
            replicas = int(count)
        except ValueError:
            replicas = 0
        if replicas < 1:
            raise ValueError(f"--scale-at {item!r} is not TIME=N (a time into the load and a replica count of 1 or "
                             "more, e.g. 60s=2)")
        plan.append((at, replicas))
    return sorted(plan)


class Schedule(Generic[T]):
    """The plan's changes at time 0 at once (the load starts on them), the later ones in a thread
    timed from `begin()`, one after another: a change due while one that lasts is still on starts
    when that one ends (its `asked` says when). A change that fails is noted and said; the run goes on.
    Each change is noted in the run folder's `note` as it is asked and as it is done, so that the load
    generator reads the changes of the run when it writes its results."""

    def __init__(self, plan: list[tuple[float, T]], act: Act[T], run_dir: Path, note: str,
                 named: Callable[[T], dict]):
        # named(change): what the change is, noted as it is asked (a change that lasts is read mid-way)
        self.plan, self.act, self.path, self.named = plan, act, run_dir / note, named
        self.events: list[dict] = []
        self.started_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._later, name=note, daemon=True)

    def begin(self) -> None:
        """Apply the changes due at 0, then time the rest from now: call it as the load starts."""
        self.started_at = time.time()
        self._write()
        for at, change in self.plan:
            if at == 0:
                self._change(at, change)
        self._thread.start()

    def end(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        self._write()

    def _write(self) -> None:
        write_atomically(self.path, json.dumps({"started_at": self.started_at, "events": self.events},
                                               indent=2) + "\n")

    def _later(self) -> None:
        for at, change in self.plan:
            if at > 0 and not self._stop.wait(max(0.0, self.started_at + at - time.time())):
                self._change(at, change)

    def _change(self, at: float, change: T) -> None:
        event: dict = {"at_s": at, **self.named(change), "asked": time.time()}
        self.events.append(event)
        self._write()
        event |= self.act(at, change, self._stop)
        self._write()
