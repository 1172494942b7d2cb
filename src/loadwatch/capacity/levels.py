"""One level of a capacity search: a headless Locust run at one request rate (or user count),
watched while it runs and stopped early once it is clearly lost."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadwatch.capacity.diagnose import refused
from loadwatch.catalogue import Engine
from loadwatch.loadrun.locust import ENOUGH, INTERRUPTED, WATCH_SECONDS, LocustRun, enough
from loadwatch.metrics.records import read_records
from loadwatch.metrics.results import latency_key
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.attribution import attribution, exact_engine_ttft
from loadwatch.report.build import CLIENT_KEYS

log = logging.getLogger(__name__)
LOST_FACTOR = 2.0  # an SLO measured over twice its limit...
LOST_AFTER = 20  # ...over at least this many requests: the level is lost, whatever the rest would say
QUEUE_WINDOW = 20.0  # seconds over which a waiting queue that only grows...
QUEUE_GROWTH = 10  # ...by at least this much, to at least QUEUE_FLOOR, grows without bound
QUEUE_FLOOR = 20


@dataclass
class Level:
    index: int
    value: float
    unit: str  # req/s or users
    name: str
    start: float = 0.0  # wall clock, after the level's warm-up: the window of its engine figures
    end: float = 0.0
    results: dict = field(default_factory=dict)
    engine: dict = field(default_factory=dict)
    replicas: dict[str, dict] = field(default_factory=dict)  # each target's own peaks: a fleet's replicas
    # Each data-parallel rank's own peaks, by server and rank, of the servers that run more than one.
    ranks: dict[str, dict[str, dict]] = field(default_factory=dict)
    stopped_early: str | None = None
    problem: str | None = None  # the level produced no results, or too few to judge
    too_few: bool = False  # its problem: it completed fewer requests than its percentiles need
    split: dict | None = None  # its requests split by the engine's own account (report.attribution)
    sure: str | None = None  # held, broke or in doubt, from its SLOs' intervals (capacity.interval); None: unjudged
    slo_intervals: list[dict] = field(default_factory=list)

    @property
    def under_slos(self) -> bool:
        """Every SLO within its limit on the requests it completed (too few to judge, or not)."""
        return all(s["passed"] for s in self.results.get("slo") or [])

    @property
    def passed(self) -> bool:
        slos = self.results.get("slo") or []
        measured = self.results.get("completed", 0) > 0
        return measured and not self.stopped_early and not self.problem and all(s["passed"] for s in slos) \
            and not refused(self.results)

    @property
    def verdict(self) -> str:
        """Held outright, held by refusing a share its rejected_ratio SLO allows, or broke, and why."""
        share = self.results.get("rejected_ratio") or 0.0
        if self.passed:
            return f"held by refusing {share:.1%} of its requests" if self.results.get("rejected") else "held"
        if refused(self.results) and not self.stopped_early and not self.problem:
            return f"broke (the server refused {share:.1%} of its requests)"
        return f"broke ({self.stopped_early or self.problem or 'SLO'})"

    def as_dict(self) -> dict:
        return {"level": self.value, "unit": self.unit, "name": self.name, "passed": self.passed,
                "stopped_early": self.stopped_early, "problem": self.problem, "start": self.start, "end": self.end,
                "slo": self.results.get("slo", []), "saturated": self.results.get("saturated", {}),
                "verdict": self.verdict, "client": {k: self.results.get(k) for k in CLIENT_KEYS}, "engine": self.engine,
                "ttft_split": self.split, "sure": self.sure, "slo_intervals": self.slo_intervals}

    def attribute(self, records: list[dict], api: PrometheusAPI | None) -> None:
        """The exact split of its requests, where its records carry the engine's account."""
        if not records:
            return
        try:
            self.split = attribution(records, api, self.start, self.end)
        except ValueError as exc:
            log.warning("no request-by-request split of %s: %s", self.name, exc)
            return
        exact_engine_ttft(self.engine, self.split)


def level_records(path: Path) -> list[dict]:
    """A level's per-request records, read once for all that uses them; none where the file is missing
    or cannot be read (said in the log)."""
    try:
        return list(read_records(path)) if path.is_file() else []
    except (OSError, ValueError) as exc:
        log.warning("the records %s cannot be read: %s", path, exc)
        return []


def lost(partial: dict) -> str | None:
    """Why a level is clearly lost from its checkpoint, or None."""
    if partial.get("saturated"):
        return "the load generator is saturated: " + "; ".join(partial["saturated"].values())
    if partial.get("completed", 0) + partial.get("failed", 0) < LOST_AFTER:
        return None
    for slo in partial.get("slo", []):
        if slo["measured"] is not None and slo["measured"] > LOST_FACTOR * slo["limit"] > 0:
            return f"{slo['name']} at {slo['measured']:.4g}, over {LOST_FACTOR:g} times its limit {slo['limit']:g}"
    return None


def queue_unbounded(api: PrometheusAPI | None, since: float) -> str | None:
    """Whether the engine's waiting queue has only grown over the last QUEUE_WINDOW seconds."""
    now = time.time()
    if api is None or now - since < QUEUE_WINDOW:
        return None
    try:
        result = api.query_range(f"sum({Engine.REQUESTS_WAITING})", now - QUEUE_WINDOW, now, WATCH_SECONDS)
    except PrometheusError:
        return None
    values = [float(v) for _, v in result[0]["values"]] if result else []
    if len(values) < 4 or values[-1] < QUEUE_FLOOR or values[-1] - values[0] < QUEUE_GROWTH:
        return None
    if all(b >= a for a, b in zip(values, values[1:], strict=False)):
        return f"the engine's waiting queue grows without bound ({values[0]:.0f} to {values[-1]:.0f} in " \
               f"{QUEUE_WINDOW:.0f} s)"
    return None


def run_level(level: Level, locust: LocustRun, target: str, api: PrometheusAPI | None, warmup: float,
              duration: float, needed: int, log_file: Path, say) -> Level:
    """Run Locust for the level and fill it in. The level lasts `duration` after its warm-up, then
    on (to the end of Locust's run time) until `needed` requests have completed; it is stopped
    early once clearly lost. Too few completed requests to judge is the level's problem, in words.
    Ctrl-C stops the level (its figures kept) and is raised again."""
    began = time.time()

    def watch() -> str | None:
        partial = locust.figures(partial=True) or {}
        # Lost first: a level that has its requests and is far over an SLO says by how much.
        if reason := lost(partial) or queue_unbounded(api, began + warmup):
            return reason
        if enough(partial, began, warmup + duration, needed):
            return ENOUGH
        return None

    finished = locust.run(target, log_file, say, watch=watch, watch_every=WATCH_SECONDS)
    level.stopped_early = None if finished.stopped_early == ENOUGH else finished.stopped_early
    level.start, level.end = began + warmup, time.time()
    level.results = locust.figures() or {}
    if not level.results:
        level.problem = f"Locust wrote no results (exit code {finished.code}; see {log_file})"
    completed = level.results.get("completed", 0)
    if level.results and not level.stopped_early and completed < needed:
        e2e = level.results.get(latency_key("e2el", "median"))
        level.too_few = True
        level.problem = (f"too few requests to judge: {completed} of the {needed} needed completed in "
                         f"{level.end - level.start:.0f} s" + (f" (median E2E {e2e / 1000:.1f} s)" if e2e else "")
                         + "; a longer --level-duration would do")
    if finished.code == INTERRUPTED:
        raise KeyboardInterrupt
    return level
