"""What one process measured, fed by Locust's request event.

On the master or a local runner the recorder holds the run's totals; on a worker it holds what
was measured since the last report, drained into `data["loadwatch"]` and merged by the master.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from loadwatch.catalogue import Client
from loadwatch.metrics import definitions as d
from loadwatch.metrics.counts import MetricCounts
from loadwatch.metrics.samples import Samples
from loadwatch.metrics.timing import RequestMetrics

REPORT_KEY = "loadwatch"


@dataclass(frozen=True)
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

    @property
    def labels(self) -> tuple[str, str]:
        return (self.model, self.scenario)


class Recorder:
    def __init__(self) -> None:
        self.counts = MetricCounts()
        self.samples = Samples()
        self.in_flight: Counter[tuple[str, ...]] = Counter()
        # Of this run (not Prometheus counters): what --num-requests and the warm-up stage follow.
        self.finished = 0
        self.warmup_finished = 0
        self.tokens_from: Counter[str] = Counter()  # successful requests by how their tokens were counted

    def record(self, req: LLMRequest) -> None:
        if req.warmup:
            self.warmup_finished += 1
            return
        self.finished += 1
        labels = req.labels
        self.counts.inc(Client.REQUESTS, labels)
        m = req.metrics
        if m is None:
            reason = req.failure_reason or "unknown"
            self.counts.inc(Client.FAILURES, (*labels, reason))
            self.samples.of(labels).add_failure(req.started_at, req.elapsed, reason)
            return
        self.counts.observe(d.TTFT.name, labels, m.ttft)
        self.counts.observe(d.E2E.name, labels, m.e2e)
        for gap in m.itl:
            self.counts.observe(d.ITL.name, labels, gap)
        if m.tpot is not None:
            self.counts.observe(d.TPOT.name, labels, m.tpot)
        if m.prompt_tokens is not None:
            self.counts.inc(Client.PROMPT_TOKENS, labels, m.prompt_tokens)
        if m.completion_tokens is not None:
            self.counts.inc(Client.GENERATION_TOKENS, labels, m.completion_tokens)
        self.samples.of(labels).add_success(req.started_at, m)
        self.tokens_from[req.tokens_from] += 1

    def start_run(self) -> None:
        """A new run in this process: the summary and the run's counts start afresh; the Prometheus
        counts stay monotonic."""
        self.samples.clear()
        self.finished = self.warmup_finished = 0
        self.tokens_from.clear()

    def reset_samples(self) -> None:
        """Locust's reset_stats: the figures of the summary start again, the counts go on."""
        self.samples.clear()

    def record_lag(self, labels: tuple[str, str], lag: float, warmup: bool) -> None:
        if not warmup:
            self.counts.observe(d.ARRIVAL_LAG.name, labels, max(0.0, lag))

    def record_drop(self, labels: tuple[str, str]) -> None:
        self.counts.inc(Client.ARRIVALS_DROPPED, labels)

    def on_request(self, context: dict | None = None, **_kwargs) -> None:
        req = (context or {}).get("llm")
        if isinstance(req, LLMRequest):
            self.record(req)

    def report(self) -> dict:
        """A worker's delta since its last report."""
        report = {
            "counts": self.counts.drain(),
            "samples": self.samples.drain(),
            "in_flight": [[list(k), n] for k, n in self.in_flight.items() if n],
            "finished": self.finished,
            "warmup_finished": self.warmup_finished,
            "tokens_from": dict(self.tokens_from),
        }
        self.finished = self.warmup_finished = 0
        self.tokens_from.clear()
        return report

    def merge(self, report: dict) -> None:
        self.counts.merge(report["counts"])
        self.samples.merge(report["samples"])
        self.finished += report["finished"]
        self.warmup_finished += report["warmup_finished"]
        self.tokens_from.update(report["tokens_from"])
