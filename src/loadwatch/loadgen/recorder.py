"""What one process measured, fed by Locust's request event.

On the master or a local runner the recorder holds the run's totals; on a worker it holds what
was measured since the last report, drained into `data["loadwatch"]` and merged by the master.
Nothing grows with the run: sketches and counts, and per-request records only until the next
write (or report, on a worker).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from dataclasses import dataclass

from loadwatch.catalogue import Client
from loadwatch.client.failures import Rejection
from loadwatch.metrics import definitions as d
from loadwatch.metrics.counts import MetricCounts
from loadwatch.metrics.records import CANCELLED, REJECTED, as_record
from loadwatch.metrics.samples import Samples
from loadwatch.metrics.slo import SLO, goodput_limits, within
from loadwatch.metrics.timing import RequestMetrics

REPORT_KEY = "loadwatch"
RECENT = 500  # the latest successful requests the master keeps for the web UI's slowest (their records)
SHIPPED_SLOW = 5  # of a worker's requests since its last report, the slowest it ships for that list
LATE_ARRIVAL = 0.1  # seconds an open-loop arrival may go out after its time before it counts as late
log = logging.getLogger(__name__)


@dataclass(slots=True)  # not frozen: made for each request (metrics/timing.py: RawTiming)
class LLMRequest:
    """One finished streamed request, as carried in the request event's `context["llm"]`."""

    model: str
    scenario: str
    started_at: float
    elapsed: float
    metrics: RequestMetrics | None = None
    failure_reason: str | None = None
    warmup: bool = False  # left out of every figure
    tokens_from: str = "usage"  # how its output tokens were counted: usage, tokenize or approximation
    request_id: str = ""  # sent as X-Request-Id
    stage: str = "load"  # the load-shape stage it was sent in
    turn: int | None = None  # a session's turn, from 1; None outside sessions
    cancelled: bool = False  # the client hung up on purpose (--cancel-ratio): neither success nor failure
    cancelled_ttft: float | None = None  # how long its first chunk took, where it came before the hang-up
    # Refused by the server's admission control, and why (client/failures.py: Rejection): neither
    # completed nor failed. Its failure_reason stays what the answer was (http_503, stream_error).
    rejection: str | None = None
    images: int = 0  # sent with it (random-mm), and their encoded bytes
    image_bytes: int = 0
    without_done: bool = False  # complete, its body ended without [DONE] (after its finish_reason)
    replica: str | None = None  # of a fleet, the replica that served it or failed it (its answer names it)
    prefix: int | None = None  # which of the workload's shared prefixes its prompt starts with
    fleet: bool = False  # sent to a fleet (--replica): its outcome is tallied by the second it ended

    @property
    def labels(self) -> tuple[str, str]:
        return (self.model, self.scenario)

    def record(self, worker: str, with_itl: bool) -> dict:
        m = self.metrics
        return as_record(self.request_id, self.started_at, worker, self.model, self.scenario,
                         "warmup" if self.warmup else self.stage, self.elapsed,
                         CANCELLED if self.cancelled else REJECTED if self.rejection else self.failure_reason, m,
                         self.tokens_from, with_itl, self.turn, self.cancelled_ttft, self.images, self.image_bytes,
                         self.replica, self.prefix, self.rejection)


class Recorder:
    def __init__(self) -> None:
        self.counts = MetricCounts()
        self.samples = Samples()
        # A fleet's requests by the replica that served them (its answer names it), as `samples` are
        # by scenario: exact across workers, merged the same way. A failure is its replica's where its
        # answer named one (smg's header on an error status or a cut stream), else no replica's.
        self.by_replica = Samples()
        # A fleet's requests by the second they ended (wall clock) -> [successes, requests not served
        # (failed, or refused by admission control: either way a user got no answer), successes outside
        # the SLOs' per-request limits]: when a replica is lost, which fell in its outage and when the
        # client's success rate came back; after a fault, when the SLOs held again.
        self.outcomes: dict[int, list[int]] = {}
        self.in_flight: Counter[tuple[str, ...]] = Counter()
        # Of this run (not Prometheus counters): what --num-requests and the warm-up stage follow.
        self.finished = 0
        self.warmup_finished = 0
        self.tokens_from: Counter[str] = Counter()  # successful requests by how their tokens were counted
        self.without_done = 0  # successful streams whose body ended without [DONE]
        self.skipped = 0  # trace entries not sent: they cannot fit the server's context
        # What a report's outcomes span, for the master's estimate of a lost worker's rate: from its
        # previous report or its first request's start, the later (wall clock, its own). Reports come
        # before any request does: from the run's start or an empty report, the rate came out low.
        self.reported_at: float | None = None
        self.first_start: float | None = None
        self.goodput: dict[str, float] = {}  # metric -> per-request limit (s) of the run's SLOs
        self.worker = "local"  # who measured, in the records
        self.keep_records = False  # per-request records wanted (a file on the master or local runner)
        self.keep_itl = False
        self.records: list[dict] = []  # not yet written (or, on a worker, not yet reported)
        self.late_arrivals = 0
        # The latest requests (on a worker, since its last report) as records: the web UI names the
        # slowest with the part that made each slow. Bounded: a worker ships SHIPPED_SLOW a report.
        self.recent: deque[dict] = deque(maxlen=RECENT)
        self.saturated: dict[str, str] = {}  # Locust process -> why it could not keep up (loadgen/monitor.py)
        self.cpu_at_start: dict[str, float] = {}  # Locust process -> its CPU seconds as the run started

    def configure(self, slos: list[SLO], keep_records: bool, keep_itl: bool) -> None:
        """What this run's settings ask of the recorder."""
        self.goodput = goodput_limits(slos)
        self.keep_records, self.keep_itl = keep_records, keep_itl

    def take_records(self) -> list[dict]:
        records, self.records = self.records, []
        return records

    def record(self, req: LLMRequest) -> None:
        if self.first_start is None or req.started_at < self.first_start:
            self.first_start = req.started_at
        record = req.record(self.worker, self.keep_itl) if self.keep_records else None
        if record is not None:
            self.records.append(record)
        if req.warmup:
            self.warmup_finished += 1
            return
        self.finished += 1
        m = req.metrics
        good = m is not None and within(self.goodput, {"ttft": m.ttft, "tpot": m.tpot, "e2el": m.e2e})
        if req.fleet:
            tally = self.outcomes.setdefault(int(req.started_at + req.elapsed), [0, 0, 0])
            tally[m is None and not req.cancelled] += 1
            tally[2] += m is not None and not good
        labels = req.labels
        if (Client.REQUESTS, labels) not in self.counts.counters:
            # Each reason's refusals at 0 from a label set's first request in each report, as vLLM
            # exports its own: a rejected panel then shows none refused, not "no data".
            for refusal in Rejection:
                self.counts.inc(Client.REJECTED, (*labels, refusal.value), 0.0)
        self.counts.inc(Client.REQUESTS, labels)
        if req.images:  # sent, whatever came back: what the server had to take in
            self.counts.inc(Client.IMAGES, labels, req.images)
            self.counts.inc(Client.IMAGE_BYTES, labels, req.image_bytes)
        series = self.samples.of((*labels, req.stage))
        if req.cancelled:  # out of every latency but TTFT, where it got that far
            self.counts.inc(Client.CANCELLED, labels)
            if req.cancelled_ttft is not None:
                self.counts.observe(d.TTFT.name, (*labels, d.turn_bucket(req.turn), ""), req.cancelled_ttft)
            series.add_cancelled(req.started_at, req.elapsed, req.cancelled_ttft)
            return
        if req.rejection is not None:  # the server refused it: in no latency, and no failure
            self.counts.inc(Client.REJECTED, (*labels, req.rejection))
            series.add_rejected(req.started_at, req.elapsed, req.rejection)
            if req.replica is not None:
                self.by_replica.of((req.replica,)).add_rejected(req.started_at, req.elapsed, req.rejection)
            return
        if m is None:
            reason = req.failure_reason or "unknown"
            self.counts.inc(Client.FAILURES, (*labels, reason))
            series.add_failure(req.started_at, req.elapsed, reason)
            if req.replica is not None:
                self.by_replica.of((req.replica,)).add_failure(req.started_at, req.elapsed, reason)
            return
        by_turn = (*labels, d.turn_bucket(req.turn), req.replica or "")
        rid, last_at = req.request_id, req.started_at + m.e2e
        if m.ttft is not None:
            self.counts.observe(d.TTFT.name, by_turn, m.ttft, rid, req.started_at + m.ttft)
        self.counts.observe(d.E2E.name, by_turn, m.e2e, rid, last_at)
        self.counts.observe_many(d.ITL.name, by_turn, m.itl)
        if m.tpot is not None:
            self.counts.observe(d.TPOT.name, by_turn, m.tpot, rid, last_at)
        if m.ttfa is not None:
            self.counts.observe(d.TTFA.name, by_turn, m.ttfa)
        if m.cached_ratio is not None:
            self.counts.observe(d.CACHED_RATIO.name, by_turn, m.cached_ratio)
        if m.tool_calls:
            self.counts.inc(Client.TOOL_CALLS, labels, m.tool_calls)
        if m.prompt_tokens is not None:
            self.counts.inc(Client.PROMPT_TOKENS, labels, m.prompt_tokens)
        if m.completion_tokens is not None:
            self.counts.inc(Client.GENERATION_TOKENS, labels, m.completion_tokens)
        series.add_success(req.started_at, m, good, req.images, req.image_bytes)
        if req.replica is not None:
            self.by_replica.of((req.replica,)).add_success(req.started_at, m, good, req.images, req.image_bytes)
        if m.ttft is not None:  # the slowest are by TTFT: an embedding or a rerank has none
            self.recent.append(record or req.record(self.worker, False))
        self.tokens_from[req.tokens_from] += 1
        self.without_done += req.without_done

    def _drain_outcomes(self) -> list:
        wire = [[second, tally] for second, tally in self.outcomes.items()]
        self.outcomes.clear()
        return wire

    def start_run(self) -> None:
        """A new run in this process: the summary and the run's counts start afresh; the Prometheus
        counts stay monotonic."""
        self.samples.clear()
        self.by_replica.clear()
        self.outcomes.clear()
        self.finished = self.warmup_finished = self.without_done = self.skipped = 0
        self.reported_at = self.first_start = None
        self.tokens_from.clear()
        self.saturated.clear()
        self.recent.clear()
        self.cpu_at_start = self.cpu_seconds()

    def cpu_seconds(self) -> dict[str, float]:
        """Each Locust process's CPU seconds so far, as its monitor counts them (workers' from their reports)."""
        return {labels[0]: seconds for labels, seconds in self.counts.counters_named(Client.CPU)}

    def busy(self, seconds: float) -> dict[str, float]:
        """The share of a core each Locust process used over the run's `seconds`."""
        if seconds <= 0:
            return {}
        return {name: (spent - self.cpu_at_start.get(name, 0.0)) / seconds
                for name, spent in sorted(self.cpu_seconds().items())}

    def reset_samples(self) -> None:
        """Locust's reset_stats: the figures of the summary start again, the counts go on."""
        self.samples.clear()
        self.by_replica.clear()

    def record_arrival(self, labels: tuple[str, str], stage: str, due: float, at: float, warmup: bool) -> None:
        """An open-loop arrival went out at `at`, due at `due` (wall-clock seconds)."""
        if not warmup:
            lag = max(0.0, at - due)
            self.counts.observe(d.ARRIVAL_LAG.name, labels, lag)
            self.late_arrivals += lag > LATE_ARRIVAL
            self.samples.of((*labels, stage)).arrivals.add(due, at, sent=True)

    def record_drop(self, labels: tuple[str, str], stage: str, due: float) -> None:
        """An arrival due at `due` was not sent: the concurrency cap was reached."""
        self.counts.inc(Client.ARRIVALS_DROPPED, labels)
        self.samples.of((*labels, stage)).arrivals.add(due, due, sent=False)

    def on_request(self, context: dict | None = None, **_kwargs) -> None:
        req = (context or {}).get("llm")
        if isinstance(req, LLMRequest):
            self.record(req)

    def report(self) -> dict:
        """A worker's delta since its last report."""
        now, since = time.time(), max(filter(None, (self.reported_at, self.first_start)), default=None)
        report = {
            "counts": self.counts.drain(),
            "samples": self.samples.drain(),
            "by_replica": self.by_replica.drain(),
            "outcomes": self._drain_outcomes(),
            "in_flight": [[list(k), n] for k, n in self.in_flight.items() if n],
            "finished": self.finished,
            "warmup_finished": self.warmup_finished,
            "tokens_from": dict(self.tokens_from),
            "without_done": self.without_done,
            "skipped": self.skipped,
            "span": now - since if since is not None else 0.0,
            "records": self.take_records(),
            "saturated": dict(self.saturated),
            "slow": sorted(self.recent, key=lambda r: r["ttft_s"], reverse=True)[:SHIPPED_SLOW],
        }
        self.recent.clear()
        self.finished = self.warmup_finished = self.without_done = self.skipped = 0
        self.tokens_from.clear()
        self.reported_at = now
        return report

    def merge(self, report: dict) -> None:
        self.counts.merge(report["counts"])
        self.samples.merge(report["samples"])
        self.by_replica.merge(report.get("by_replica", []))
        for second, counts in report.get("outcomes", []):
            tally = self.outcomes.setdefault(second, [0, 0, 0])
            for i, count in enumerate(counts):
                tally[i] += count
        self.finished += report["finished"]
        self.warmup_finished += report["warmup_finished"]
        self.tokens_from.update(report["tokens_from"])
        self.without_done += report["without_done"]
        self.skipped += report["skipped"]
        if self.keep_records:
            self.records.extend(report["records"])
        self.recent.extend(report["slow"])
        for process, reason in report["saturated"].items():
            if process not in self.saturated:
                self.saturated[process] = reason
                log.warning("The load generator is a bottleneck: worker %s is saturated (%s). Its figures include "
                            "its own delays and it may not deliver the load asked; give it more workers, cores "
                            "or machines.",
                            process, reason)
