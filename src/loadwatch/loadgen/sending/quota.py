"""Which requests a run may still send, and which of them are warm-up.

`--num-requests N` and `--warmup-requests K` are exact across any number of workers: the master
holds the tickets and hands them out in small batches to the workers that ask, so a worker with
no users holds none back. Tickets are taken before a request's t0, outside every measurement.
Measured tickets are numbered from 0 in the order the pool gives them out: a trace replay sends
its entry of that number, so every entry goes out once, whichever worker holds it.
"""

from __future__ import annotations

from collections import deque
from time import monotonic

from gevent.event import AsyncResult
from gevent.lock import Semaphore

WARMUP, MEASURED = "warmup", "measured"
Ticket = tuple[str, int | None]  # kind, and a measured ticket's number
ASK, GRANT = "loadwatch_tickets", "loadwatch_grant"
FLUSH, FINAL = "loadwatch_flush", "loadwatch_final"


class Tickets:
    """The run's pool, on the master or a local runner. None for a count means no limit."""

    def __init__(self, requests: int | None, warmup_requests: int) -> None:
        self.warmup_left = warmup_requests
        self.measured_left = requests
        self.numbered = 0  # measured tickets given out

    def take(self, n: int = 1) -> list[Ticket]:
        tickets: list[Ticket] = []
        while len(tickets) < n:
            if self.warmup_left > 0:
                self.warmup_left -= 1
                tickets.append((WARMUP, None))
                continue
            if self.measured_left is not None:
                if self.measured_left == 0:
                    break
                self.measured_left -= 1
            tickets.append((MEASURED, self.numbered))
            self.numbered += 1
        return tickets


class WorkerTickets:
    """A worker's supply: batches asked from the master, one request at a time."""

    def __init__(self, runner, batch: int) -> None:
        self.runner, self.batch = runner, batch
        self.kinds: deque[Ticket] = deque()
        self.exhausted = False
        self._asking = Semaphore()
        self._reply: AsyncResult | None = None
        runner.register_message(GRANT, self._granted)

    def reset(self) -> None:
        self.kinds.clear()
        self.exhausted = False

    def _granted(self, msg, **_kwargs) -> None:
        if self._reply is not None:
            self._reply.set([tuple(ticket) for ticket in msg.data["kinds"]])

    def take(self, n: int = 1) -> list[Ticket]:
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
        ticket = self.take_numbered()
        return None if ticket is None else ticket[0]

    def take_numbered(self) -> Ticket | None:
        if self.closed:
            return None
        # The warm-up seconds take no ticket, so --num-requests still counts measured requests only.
        if monotonic() < self.warmup_until:
            return WARMUP, None
        if self.tickets is None:
            return MEASURED, None
        tickets = self.tickets.take()
        # A worker's take may wait for the master's grant, and the run's end may come meanwhile: its
        # last report has gone, so a request sent now would be seen by the server and counted nowhere.
        return tickets[0] if tickets and not self.closed else None
