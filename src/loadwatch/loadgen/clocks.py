"""Each worker's wall clock against the master's, from a ping over Locust's own messages.

A record's start is its worker's wall-clock time; the timeline, `explain` (the engine's state when
a request ran), report.html and Grafana's annotations all read it against the master's clock and
Prometheus's. Hosts whose clocks disagree by a second would put a request a second away from the
engine state it met. So the master pings each worker (when it says hello, and every few seconds
after): t0 on the master, the worker's time tw, t1 back on the master. The worker's clock is ahead by
tw - (t0 + t1) / 2, give or take half the round trip; the reply with the least round trip is kept.
The records' start times are corrected by it as they arrive; their durations need none (monotonic).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)
PING, PONG = "loadwatch_clock_ping", "loadwatch_clock_pong"
UNCERTAIN = 0.1  # seconds: an offset known less well than this is warned about
PINGS_AT_HELLO = 5


@dataclass(frozen=True)
class Offset:
    seconds: float  # the worker's clock minus the master's
    uncertainty: float  # half the round trip of the ping it came from


class Clocks:
    def __init__(self) -> None:
        self.best: dict[str, Offset] = {}

    def pong(self, worker: str, t0: float, tw: float, t1: float) -> None:
        """A worker's answer `tw` to a ping sent at `t0`, received at `t1` (master's clock)."""
        if t1 < t0:
            return
        offset = Offset(tw - (t0 + t1) / 2, (t1 - t0) / 2)
        known = self.best.get(worker)
        if known is None or offset.uncertainty < known.uncertainty:
            self.best[worker] = offset

    def correct(self, worker: str, records: list[dict]) -> None:
        """Records of `worker`, their start times on the master's clock."""
        offset = self.best.get(worker)
        if offset is None or not offset.seconds:
            return
        for record in records:
            record["start"] = round(record["start"] - offset.seconds, 6)

    def on_workers_clock(self, worker: str, at: float | None) -> float | None:
        """The master's time `at` on `worker`'s clock: a moment the worker must act on (the load
        shape's start, from which it tells each request's stage), not one it only reports; None
        while that moment is not known."""
        offset = self.best.get(worker)
        return at + offset.seconds if offset is not None and at is not None else at

    def as_results(self) -> dict[str, dict[str, float]]:
        return {worker: {"offset_s": round(o.seconds, 6), "uncertainty_s": round(o.uncertainty, 6)}
                for worker, o in sorted(self.best.items())}

    def warn_uncertain(self) -> None:
        for worker, offset in sorted(self.best.items()):
            if offset.uncertainty > UNCERTAIN:
                log.warning("Worker %s's clock is %+.3f s from the master's, give or take %.3f s: its requests' "
                            "times are that uncertain on the master's timeline", worker, offset.seconds,
                            offset.uncertainty)
