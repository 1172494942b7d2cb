"""A fleet's replicas as the run goes: which one was lost and when, when the router stopped sending to
it, and when it came back. The master (or a local runner) reads the sidecar's /metrics
(--engine-metrics) every second, never in a request's path: each replica is a target there (with
its `up`), and the router's count of the requests it sent to each replica, failed tries included,
is there too (catalogue.Router.REPLICA_REQUESTS). That count stops moving once the router stops
sending to the lost replica (its health checks, or its circuit breaker). The router's retries and
its circuit breaker's state and counted failures are kept from each reading too: a fault's figures
(loadgen/faults.py) say what the router did while it lasted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from loadwatch import loopback
from loadwatch.catalogue import Engine, Router, total
from loadwatch.loadgen.ticker import every
from loadwatch.settings import ReplicaNames

log = logging.getLogger(__name__)
INTERVAL = 1.0
TIMEOUT = 1.0
RECOVERED_SECONDS = 3  # seconds in a row with requests and no failure: the client's success rate is back
# How late a loss may be seen: the sidecar samples each replica every second and the watch reads the
# sidecar every second, so a replica is seen down 2 s after it went on a quiet machine, later on a busy
# one; its requests in flight failed when it went.
SEEN_LATE = 5


@dataclass
class Outage:
    replica: str
    lost_at: float  # the first reading in which the sidecar had it down (wall clock): up to SEEN_LATE s late
    last_sent_at: float | None = None  # the last reading in which the router's count of sends to it moved
    back_at: float | None = None  # the first reading in which it was up again


@dataclass
class RouterReading:
    """The router's view at one reading: its retries (every route), and by replica its circuit
    breaker's state (0 closed, 1 open, 2 half-open) and the failures the breaker counted. A router
    exposes a counter from its first count on (vllm-router's retries, a replica's breaker failures):
    one the sidecar read the router without is 0, not unknown."""

    at: float
    seen: bool = False  # the sidecar read the router: its counters absent here are 0
    retries: float = 0.0
    breaker: dict[str, float] = field(default_factory=dict)
    breaker_failures: dict[str, float] = field(default_factory=dict)


def read(text: str, at: float = 0.0) -> tuple[dict[str, bool], dict[str, float], RouterReading]:
    """Each replica's up, the router's count of requests sent to it and the router's reading, from the
    sidecar's payload."""
    up: dict[str, bool] = {}
    sent: dict[str, float] = {}
    router = RouterReading(at)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            replica = sample.labels.get("replica")
            if sample.name == Router.UP:
                router.seen = router.seen or sample.value >= 1
            elif sample.name == Engine.UP and "target" in sample.labels:
                up[sample.labels["target"]] = sample.value >= 1
            elif sample.name == total(Router.REPLICA_REQUESTS) and replica:
                sent[replica] = sent.get(replica, 0.0) + sample.value
            elif sample.name == total(Router.RETRIES):
                router.retries += sample.value
            elif sample.name == Router.REPLICA_CIRCUIT_BREAKER and replica:
                router.breaker[replica] = sample.value
            elif sample.name == total(Router.REPLICA_CIRCUIT_BREAKER_OUTCOMES) and replica \
                    and sample.labels.get("outcome") == "failure":
                router.breaker_failures[replica] = router.breaker_failures.get(replica, 0.0) + sample.value
    return up, sent, router


class ReplicaWatch:
    def __init__(self, url: str, names: ReplicaNames, fetch: Callable[[str], str] | None = None) -> None:
        self.url, self.names = url, names
        self.fetch = fetch or _fetch
        self.outages: list[Outage] = []
        self._seen_up: set[str] = set()
        self._sent: dict[str, float] = {}
        # The router's readings where they changed: a run's faults read what the router did. Each holds
        # until the next one.
        self.router: list[RouterReading] = []

    def read_once(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        try:
            up, sent, router = read(self.fetch(self.url), now)
        except (OSError, ValueError):
            return  # the sidecar unread says nothing of the replicas
        last = self.router[-1] if self.router else None
        if last is None or (last.seen, last.retries, last.breaker, last.breaker_failures) != \
                (router.seen, router.retries, router.breaker, router.breaker_failures):
            self.router.append(router)  # a change: a soak's hours of a quiet router stay a few readings
        for name in sorted(self.names.listed(frozenset(up)) & set(up)):
            open_ = next((o for o in self.outages if o.replica == name and o.back_at is None), None)
            if up[name]:
                self._seen_up.add(name)
                if open_ is not None:
                    open_.back_at = now
                    log.warning("Replica %s is back, %.1f s after it was lost", name, now - open_.lost_at)
            elif name in self._seen_up and open_ is None:
                open_ = Outage(name, now)
                self.outages.append(open_)
                log.warning("Replica %s is lost (the sidecar cannot read it): the run goes on with the rest", name)
            moved = name in sent and sent[name] > self._sent.get(name, sent[name])
            if open_ is not None and open_.back_at is None and moved:
                open_.last_sent_at = now
        self._sent.update(sent)

    def start(self) -> None:
        every(INTERVAL, self.read_once)
        log.info("The replicas (%s) watched through %s every %g s",
                 ", ".join(sorted(self.names.exact) + list(self.names.patterns)), self.url, INTERVAL)


def outage_figures(outage: Outage, outcomes: dict[int, list[int]], ended_at: float) -> dict:
    """An outage as the results give it. `outcomes`: second (wall clock, when requests ended) ->
    [successes, failures]. Its failures are those that ended from SEEN_LATE seconds before the loss was
    seen (requests in flight on the replica when it went) until the client's success rate recovered:
    the first of RECOVERED_SECONDS seconds in a row, after its first failure, that each had requests and
    no failure (none failed: at once, the router having sent every request elsewhere)."""
    start, last = int(outage.lost_at) - SEEN_LATE, int(ended_at) + 1
    first = next((s for s in range(start, last) if outcomes.get(s, [0, 0])[1]), None)
    recovered = None if first is not None else float(start)
    for second in range(first + 1, last) if first is not None else ():
        window = [outcomes.get(s, [0, 0]) for s in range(second, second + RECOVERED_SECONDS)]
        if all(tally[0] > 0 and tally[1] == 0 for tally in window):
            recovered = second
            break
    end = int(recovered) if recovered is not None else last
    failed = sum(outcomes.get(s, [0, 0])[1] for s in range(start, end))
    return {**asdict(outage),
            "failed_in_window": failed,
            # From the loss until the router's last send to it (0: it sent nothing more); None while
            # it was still sending at the run's end.
            "router_stopped_after_s": None if outage.back_at is None and outage.last_sent_at is not None
            and ended_at - outage.last_sent_at < 2 * INTERVAL
            else max(0.0, (outage.last_sent_at or outage.lost_at) - outage.lost_at),
            "recovered_after_s": None if recovered is None else max(0.0, recovered - outage.lost_at)}


def _fetch(url: str) -> str:
    with loopback.urlopen(url, timeout=TIMEOUT) as response:
        return response.read().decode()
