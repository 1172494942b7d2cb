"""Which requests a run may still send, and which of them are warm-up.

`--num-requests N` and `--warmup-requests K` are exact across any number of workers: the master
holds the tickets and hands them out in small batches to the workers that ask, so a worker with
no users holds none back. Tickets are taken before a request's t0, outside every measurement.
"""

from __future__ import annotations

from collections import deque
from time import monotonic

from gevent.event import AsyncResult
from gevent.lock import Semaphore

WARMUP, MEASURED = "warmup", "measured"
ASK, GRANT = "loadwatch_tickets", "loadwatch_grant"
FLUSH, FINAL = "loadwatch_flush", "loadwatch_final"


class Tickets:
    """The run's pool, on the master or a local runner. None for a count means no limit."""

    def __init__(self, requests: int | None, warmup_requests: int) -> None:
        self.warmup_left = warmup_requests
        self.measured_left = requests

    def take(self, n: int = 1) -> list[str]:
        kinds: list[str] = []
        while len(kinds) < n:
            if self.warmup_left > 0:
                self.warmup_left -= 1
                kinds.append(WARMUP)
            elif self.measured_left is None:
                kinds.append(MEASURED)
            elif self.measured_left > 0:
                self.measured_left -= 1
                kinds.append(MEASURED)
            else:
                break
        return kinds


class WorkerTickets:
    """A worker's supply: batches asked from the master, one request at a time."""

    def __init__(self, runner, batch: int) -> None:
        self.runner, self.batch = runner, batch
        self.kinds: deque[str] = deque()
        self.exhausted = False
        self._asking = Semaphore()
        self._reply: AsyncResult | None = None
        runner.register_message(GRANT, self._granted)

    def reset(self) -> None:
        self.kinds.clear()
        self.exhausted = False

    def _granted(self, msg, **_kwargs) -> None:
        if self._reply is not None:
            self._reply.set(msg.data["kinds"])

    def take(self, n: int = 1) -> list[str]:
        with self._asking:
            if not self.kinds and not self.exhausted:
                self._reply = AsyncResult()
                self.runner.send_message(ASK, {"n": self.batch})
                granted = self._reply.get()
                self.kinds.extend(granted)
                self.exhausted = not granted
            return [self.kinds.popleft()] if self.kinds else []


class Quota:
    """What one process asks before each request: warm-up, measured, or stop (None)."""

    def __init__(self, tickets: Tickets | WorkerTickets | None, warmup_seconds: float) -> None:
        self.tickets = tickets
        self.warmup_until = monotonic() + warmup_seconds
        self.closed = False  # the run is stopping: no new request

    def take(self) -> str | None:
        if self.closed:
            return None
        # The warm-up seconds take no ticket, so --num-requests still counts measured requests only.
        if monotonic() < self.warmup_until:
            return WARMUP
        if self.tickets is None:
            return MEASURED
        kinds = self.tickets.take()
        return kinds[0] if kinds else None
