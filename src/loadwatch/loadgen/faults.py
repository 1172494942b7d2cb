"""A run's faults (--fault-at, fleet/faults.py) as the results give them: what the client saw, what
the router did about it and when the fleet served within its SLOs again.

The faults are read from the run folder's faults.json, which `loadwatch run` writes as each fault is
asked and done; the client's side is the master's count of outcomes a second (successes, failures,
successes outside the SLOs' per-request limits, loadgen/recorder.py), and the router's is what the
replica watch read from the sidecar each second (its retries, its circuit breaker).
"""

from __future__ import annotations

import json
from pathlib import Path

from loadwatch.fleet.faults import FAULTS
from loadwatch.loadgen.replica_watch import RouterReading
from loadwatch.metrics.slo import held_since

EMPTY = (0, 0, 0)


def served_well(tally: list[int] | tuple[int, ...]) -> bool | None:
    """A second's verdict: every request that ended in it succeeded within the SLOs' per-request limits;
    None: none ended in it."""
    ok, failed, missed = (*tally, 0)[:3]
    if ok + failed == 0:
        return None
    return failed == 0 and missed == 0


def _growth(readings: list[RouterReading], start: float, end: float, of) -> float | None:
    """How much a counter (`of`: a reading -> its value) grew from the last reading of the router
    before `start` (0 where there was none: the router started with the fleet) to the last one before
    `end`; None where the sidecar never read the router."""
    seen = [r for r in readings if r.seen and r.at <= end]
    if not seen:
        return None
    before = [r for r in seen if r.at < start]
    return of(seen[-1]) - (of(before[-1]) if before else 0.0)


def fault_figures(event: dict, until: float, outcomes: dict[int, list[int]], router: list[RouterReading]) -> dict:
    """A fault as the results give it, over the time from its asking to `until` (the next fault's, or
    the run's end): the requests not served (failed, or refused by admission control) and those that
    succeeded outside the SLOs; after how
    long the fleet served within them again (`slo_held_again_s`, from the fault's asking: from the
    first second from which every second with requests, up to `until`, had none failed and none outside
    the SLOs; 0 where none broke; None where the last ones still broke); the router's retries; and the
    circuit breaker of the faulted replica: whether it opened (or went half-open) and the failures it
    counted."""
    start, last = int(event["asked"]), int(until) + 1
    seconds = [(float(s), outcomes.get(s, list(EMPTY))) for s in range(start, last)]
    since = held_since([(at, served_well(tally)) for at, tally in seconds])
    replica = event["replica"]
    # The breaker's states over the fault: the reading that held as it was asked, and those that followed.
    held = [r for r in router if r.at <= event["asked"]][-1:]
    states = [r.breaker[replica] for r in [*held, *(r for r in router if event["asked"] < r.at <= until)]
              if replica in r.breaker]
    return {**event,
            # Failed or refused: either way its user got no answer (results.json tells the two apart).
            "not_served": sum(tally[1] for _, tally in seconds),
            "outside_slo": sum((*tally, 0)[2] for _, tally in seconds),
            "slo_held_again_s": None if since is None else round(max(0.0, since - event["asked"]), 1),
            "router_retries": _growth(router, event["asked"], until, lambda r: r.retries),
            "breaker_opened": any(state > 0 for state in states) if states else None,
            "breaker_failures": _growth(router, event["asked"], until, lambda r: r.breaker_failures.get(replica, 0.0))}


def run_faults(run_dir: Path, outcomes: dict[int, list[int]], router: list[RouterReading],
               ended_at: float) -> list[dict]:
    """The run's faults, each with its figures; [] for a run that made none (no faults.json)."""
    path = run_dir / FAULTS
    if not path.is_file():
        return []
    events = json.loads(path.read_text())["events"]
    return [fault_figures(event, events[i + 1]["asked"] if i + 1 < len(events) else ended_at, outcomes, router)
            for i, event in enumerate(events)]
