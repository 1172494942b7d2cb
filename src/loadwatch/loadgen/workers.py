"""The master's account of each worker: tickets dealt, outcomes reported, requests in flight, when it
was last heard. At the stop, a worker whose last report never comes is lost (killed, or its host cut
off), and the requests it sent but never reported are counted as unknown, never as successes: the
server saw them, the results must say so.

How many are unknown: with --num-requests, the tickets dealt to it minus the outcomes it reported
(a ticket held but never used counts too: an upper bound). In a run bounded by time, the requests in
flight at its last report plus what it sent from then until it was lost, at the rate of its last
report, over the seconds that report spans by the worker's clock (a first report's from its first
request: from the run's start, the worker's start-up counted as idle time and the rate came out
low). It was lost after its last heartbeat (one a second, read from Locust's count of them), and at
most two seconds after it: an estimate, said as such, and high rather than low.

A worker lost before a report of its own spanned a request has no rate: Locust sends its first
report before loadwatch's handlers are in, and the next, 3 s later, may still come before its users'
first request. Counting nothing for one lost in its first seconds would say its requests never
happened. It is given its peers' rate per user, for its own users, from when its users were first
seen (or its last report, if later) until it was lost. With no peer to learn from either, each of its
users counts one request: at least what was in flight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LOOK_EVERY = 1.0  # seconds between the master's looks at its workers' heartbeats
LOST_WITHIN = 2.0  # seconds after its last heartbeat seen: one between heartbeats, one between our looks


@dataclass
class Account:
    granted: int = 0  # --num-requests tickets dealt to it
    reported: int = 0  # outcomes it reported, warm-up included
    in_flight: int = 0  # at its last report
    last_heard: float = 0.0  # wall clock of its last report
    rate: float | None = None  # outcomes a second over the seconds its last report spans; None: none spanned one
    alive_at: float | None = None  # wall clock: its last heartbeat, as near as Locust's count tells
    users: int = 0  # the most Locust said it ran
    users_since: float | None = None  # wall clock: when it was first seen running users


def host_of(worker: str) -> str:
    """Locust names a worker `<hostname>_<uuid>`."""
    return worker.rpartition("_")[0] or worker


class Workers:
    def __init__(self) -> None:
        self.accounts: dict[str, Account] = {}
        self.lost: list[dict] = []
        self.removed: set[str] = set()  # by Locust, after a minute of silence: lost already, before the stop
        # From the stop on, reports span users that start nothing new (while the master awaits a lost
        # worker, the others go on reporting nothing done): not their rate, which a lost peer may borrow.
        self.stopping = False

    def reset(self) -> None:
        self.accounts.clear()
        self.lost.clear()
        self.removed.clear()
        self.stopping = False

    def granted(self, worker: str, n: int) -> None:
        self.accounts.setdefault(worker, Account()).granted += n

    def reported(self, worker: str, report: dict, at: float) -> None:
        account = self.accounts.setdefault(worker, Account())
        finished = report["finished"] + report["warmup_finished"] + report["skipped"]
        if report["span"] > 0 and not self.stopping:
            account.rate = finished / report["span"]
        account.reported += finished
        account.in_flight = sum(n for _labels, n in report["in_flight"])
        account.last_heard = at

    def heartbeat(self, worker: str, at: float, users: int = 0) -> None:
        """A look at the worker, `at` its last heartbeat, running `users` as Locust last heard."""
        account = self.accounts.setdefault(worker, Account())
        account.alive_at = max(at, account.alive_at or at)
        if users and account.users_since is None:
            account.users_since = at - LOOK_EVERY  # they may have started just after the previous look
        account.users = max(account.users, users)  # the most it ran: at the stop Locust's count falls to 0

    def known(self) -> set[str]:
        return set(self.accounts)

    def remove(self, worker: str) -> None:
        self.removed.add(worker)

    def written_off(self) -> int:
        """--num-requests tickets dealt to removed workers and never reported: a run that counts its
        requests ends without them, or it would wait for them for ever."""
        return sum(max(0, self.accounts[w].granted - self.accounts[w].reported) for w in self.removed
                   if w in self.accounts)

    def lose(self, workers: set[str], counted: bool, now: float) -> list[dict]:
        """Mark these workers lost (by `now` at the latest); what the results say of each."""
        for worker in sorted(workers):
            account = self.accounts.get(worker, Account())
            lost_at = min(now, account.alive_at + LOST_WITHIN) if account.alive_at is not None else now
            if counted:
                unknown, how = max(0, account.granted - account.reported), "tickets dealt minus outcomes reported"
            elif account.rate is not None:
                since = max(0.0, lost_at - account.last_heard)
                unknown = account.in_flight + math.ceil(account.rate * since)
                how = "in flight at its last report plus its last rate until it was lost (an estimate)"
            else:
                unknown, how = self._unknown_without_a_rate(account, lost_at)
            self.lost.append({"worker": worker, "host": host_of(worker), "last_heard": account.last_heard or None,
                              "lost_at": lost_at, "unknown": unknown, "unknown_counted_as": how})
        return self.lost

    def _unknown_without_a_rate(self, account: Account, lost_at: float) -> tuple[int, str]:
        peers = [a for a in self.accounts.values() if a.rate and a.users]
        if not peers:
            return max(account.in_flight, account.users), "one request for each of its users, at least (no rate known)"
        per_user = sum(a.rate or 0.0 for a in peers) / sum(a.users for a in peers)
        since = max(0.0, lost_at - max(account.last_heard, account.users_since)) if account.users_since else 0.0
        how = f"its peers' rate per user for its {account.users} users until it was lost (an estimate: none of its own)"
        return account.in_flight + math.ceil(per_user * account.users * since), how

    def unknown(self) -> int:
        return sum(w["unknown"] for w in self.lost)
