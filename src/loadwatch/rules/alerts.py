"""prometheus/rules/alerts.yml, built here: each alert once, with its severity, its runbook and why.

Symptoms page (`critical`: the user sees it, or nothing is served); causes warn (`warning`: they
explain a symptom, or will cause one). `Watchdog` always fires (`none`): a receiver that stops
hearing it knows the alert path is broken. Each alert's `runbook_url` is RUNBOOK_BASE (a
parameter of the generator: there is no public site yet) and the alert's section of
docs/runbooks.md. The SLO alerts follow the run's own objectives (the catalogue's SLO_OBJECTIVE,
one series per `--slo`), and fall back to a default where the run gave none.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from loadwatch import yamlblock
from loadwatch.catalogue import SLO_OBJECTIVE, Client, Engine, Router, total
from loadwatch.rules.recording import CLIENT_DROP, CLIENT_LEVEL, ENGINE_DROP, ENGINE_LEVEL, FLEET_DROP, per_replica

# Where docs/runbooks.md is published: `python -m loadwatch.rules --runbook-url-base URL`, or the
# environment's LOADWATCH_RUNBOOK_URL_BASE. `.invalid` is the name that can never resolve: say yours.
DEFAULT_RUNBOOK_BASE = "https://loadwatch.invalid/runbooks"
RUNBOOK_BASE_ENV = "LOADWATCH_RUNBOOK_URL_BASE"
# vLLM answers /metrics once its model is loaded: minutes. An engine that has not come up this long
# after the sidecar began watching it is down, not starting.
START_ALLOWANCE = "15m"
DEFAULT_TTFT_P99_SECONDS = 2.0  # without a TTFT objective of the run's
DEFAULT_FAILURE_RATIO = 0.05  # without a failure_ratio objective
# Each --slo latency statistic, and the measure of it over the last minute.
_TTFT_HIST = f"sum without ({CLIENT_DROP}) (rate({Client.TTFT}_bucket[1m]))"
TTFT_MEASURES = {
    "mean": f"sum without ({CLIENT_DROP}) (rate({Client.TTFT}_sum[1m]))\n"
            f"  / sum without ({CLIENT_DROP}) (rate({Client.TTFT}_count[1m]))",
    "median": f"{CLIENT_LEVEL}:{Client.TTFT}:p50_rate1m",
    "p50": f"{CLIENT_LEVEL}:{Client.TTFT}:p50_rate1m",
    "p90": f"{CLIENT_LEVEL}:{Client.TTFT}:p90_rate1m",
    "p95": f"histogram_quantile(0.95, {_TTFT_HIST})",
    "p99": f"{CLIENT_LEVEL}:{Client.TTFT}:p99_rate1m",
}
FAILURE_RATIO = f"{CLIENT_LEVEL}:{Client.FAILURES}:ratio_rate1m"
SEVERITIES = ("critical", "warning", "none")


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    severity: str
    summary: str
    description: str
    for_: str = "0s"

    @property
    def anchor(self) -> str:
        """The heading's anchor in docs/runbooks.md (a heading `## Name` gives `#name`)."""
        return self.name.lower()


def _ttft_expr() -> str:
    terms = []
    for stat, measure in TTFT_MEASURES.items():
        slo = f"ttft_{stat}_ms"
        terms.append(f'label_replace({measure}, "slo", "{slo}", "", "")\n'
                     f'  > on (slo) group_left ()\n'
                     f'  (max by (slo) ({SLO_OBJECTIVE}{{slo="{slo}"}}) / 1000)')
    default = f"ttft_p99_ms (default {DEFAULT_TTFT_P99_SECONDS * 1000:g})"
    terms.append(f'label_replace({TTFT_MEASURES["p99"]}, "slo", "{default}", "", "")\n'
                 f'  > {DEFAULT_TTFT_P99_SECONDS:g}\n'
                 f'  unless on () {SLO_OBJECTIVE}{{slo=~"ttft_.*"}}')
    return "\nor\n".join(f"(\n  {t}\n)" for t in terms) + "\n"


def _failure_expr() -> str:
    return (f'(\n  {FAILURE_RATIO}\n  > on () group_left () max({SLO_OBJECTIVE}{{slo="failure_ratio"}})\n)\n'
            f'or\n(\n  {FAILURE_RATIO} > {DEFAULT_FAILURE_RATIO:g}\n'
            f'  unless on () {SLO_OBJECTIVE}{{slo="failure_ratio"}}\n)\n')


ALERTS = (
    Alert(
        "VLLMEngineDown",
        # Up within the last hour and down now: it went away. Or watched for longer than any start
        # takes and still down: it never came up. A cold start's minutes of loading are neither.
        f"{Engine.UP} == 0\nand (\n  max_over_time({Engine.UP}[1h]) == 1\n  or\n"
        f"  {Engine.UP} offset {START_ALLOWANCE}\n)\n",
        "critical", "vLLM engine is down.",
        "The sidecar {{ $labels.instance }} cannot read /metrics of {{ $labels.target }}: it answered within the "
        f"last hour and went away, or it has not come up {START_ALLOWANCE} after the sidecar began watching it. "
        "Behind a router, the requests it still sends there fail or are retried on the other replicas until its "
        f"health checks mark the replica unhealthy ({Router.REPLICA_HEALTHY}).",
        "1m"),
    Alert(
        "VLLMRouterDown",
        # The one address clients use: when it does not answer, every request fails, whatever the
        # replicas behind it can do.
        f"{Router.UP} == 0",
        "critical", "The fleet's router is down.",
        "The sidecar {{ $labels.instance }} cannot read the metrics of router {{ $labels.router }} for 1 minute: "
        "clients' requests to the fleet fail, though its replicas may be up.",
        "1m"),
    Alert(
        "LoadTestTTFTSLOViolated", _ttft_expr(), "critical",
        "Load test TTFT is above its objective.",
        "Scenario {{ $labels.scenario }} ({{ $labels.model }}) breaks {{ $labels.slo }}: the time to first "
        "token over the last minute is {{ $value | humanizeDuration }}.",
        "1m"),
    Alert(
        "LoadTestFailureRateHigh", _failure_expr(), "critical",
        "Load test requests are failing.",
        "{{ $value | humanizePercentage }} of scenario {{ $labels.scenario }} ({{ $labels.model }}) requests "
        "failed over the last minute.",
        "1m"),
    Alert(
        "VLLMSchedulerStuck",
        # What no /health shows (vllm-project/vllm#53130): requests wait and nothing is generated
        # while the KV cache has room. A full cache is VLLMKVCacheSaturated's; a busy engine generates.
        "(\n"
        f'  sum without (engine, reason) ({Engine.REQUESTS_WAITING_BY_REASON}{{reason="deferred"}}) > 0\n'
        "  or\n"
        f"  (sum without (engine) ({Engine.REQUESTS_WAITING}) > 0\n"
        f"   and sum without (engine) ({Engine.REQUESTS_RUNNING}) == 0)\n"
        ")\nand\n"
        f"sum without (engine) (rate({total(Engine.GENERATION_TOKENS)}[5m])) == 0\n"
        f"and\nmax without (engine) ({Engine.KV_CACHE_USAGE}) < 0.9\n",
        "critical", "The vLLM scheduler is stuck.",
        "{{ $labels.target }} ({{ $labels.model }}) has had {{ $value }} requests waiting and has generated no "
        "token for 5 minutes, with its KV cache not full; /health may still answer 200.",
        "5m"),
    Alert(
        "VLLMKVCacheSaturated",
        # Both together: a prefill-bound engine queues with its KV cache half empty, and a full
        # cache with nothing waiting is an engine simply using its memory.
        f"max without (engine) ({Engine.KV_CACHE_USAGE_MAX}) >= 0.9\nand\n"
        f"max without (engine) ({Engine.REQUESTS_WAITING_MAX}) > 0\n",
        "warning", "vLLM KV cache is saturated and requests are queueing.",
        "{{ $labels.target }} ({{ $labels.model }}) peaked at {{ $value | humanizePercentage }} KV cache usage "
        "with requests waiting for 2 minutes; new requests queue or preempt others.",
        "2m"),
    Alert(
        "VLLMRequestQueueGrowing",
        f"sum without (engine) ({Engine.REQUESTS_WAITING}) > 10\nand\n"
        f"sum without (engine) (delta({Engine.REQUESTS_WAITING}[5m])) > 0\n",
        "warning", "vLLM request queue keeps growing.",
        "{{ $labels.target }} ({{ $labels.model }}) has {{ $value }} requests waiting and the queue grew over "
        "the last 5 minutes.",
        "5m"),
    Alert(
        "VLLMFleetImbalanced",
        # One replica queues (at its peak of the window) while another waited for nothing at all: the
        # routing, not the fleet's size, makes users wait. An even fleet that is full queues on every
        # replica, and an idle one on none: neither fires. The replicas are counted by their own queue
        # series (`up` carries no model, and a replica that is down exposes nothing else).
        f"max without ({FLEET_DROP}) ({per_replica(Engine.REQUESTS_WAITING_MAX)}) > 0\nand\n"
        f"min without ({FLEET_DROP}) ({per_replica(Engine.REQUESTS_WAITING_MAX)}) == 0\nand\n"
        f"count without ({FLEET_DROP}) ({per_replica(Engine.REQUESTS_WAITING_MAX)}) > 1\n",
        "warning", "One replica of the fleet queues while another has room.",
        "Up to {{ $value }} requests have waited on the busiest replica of {{ $labels.model }} for 5 minutes while "
        "another replica had none waiting: the router sends it more than it can take (its policy, a slow or "
        "small replica, or prefix affinity).",
        "5m"),
    Alert(
        "VLLMRanksImbalanced",
        # VLLMFleetImbalanced one level down: the data-parallel ranks of one server (vLLM's `engine`
        # label), whose balancer sends to the rank with the fewest waiting plus running unless a
        # header pins a request. A rank queueing while a rank of the same server waits for nothing is
        # a pinning router or long requests the count does not weigh; a full or idle server is even.
        f"max without ({ENGINE_DROP}) ({Engine.REQUESTS_WAITING_MAX}) > 0\nand\n"
        f"min without ({ENGINE_DROP}) ({Engine.REQUESTS_WAITING_MAX}) == 0\nand\n"
        f"count without ({ENGINE_DROP}) ({Engine.REQUESTS_WAITING_MAX}) > 1\n",
        "warning", "One data-parallel rank of a server queues while another has room.",
        "Up to {{ $value }} requests have waited on the busiest rank of {{ $labels.target }} ({{ $labels.model }}) "
        "for 5 minutes while another rank had none waiting: requests pinned to a rank (X-data-parallel-rank), or "
        "long ones held on it.",
        "5m"),
    Alert(
        "VLLMPreemptionsHigh",
        f"sum without (engine) (rate({total(Engine.PREEMPTIONS)}[5m])) > 1",
        "warning", "vLLM is preempting requests.",
        "{{ $labels.target }} ({{ $labels.model }}) preempts {{ $value | humanize }} requests per second: the "
        "KV cache is too small for the load.",
        "5m"),
    Alert(
        "VLLMSheddingLoad",
        # vLLM's admission control (--max-num-queued-reqs, --max-num-queued-tokens) refuses with a 503 what
        # it will not queue: a short burst of refusals is the limit doing its job through a spike, so only a
        # share over 1 % of what the engine was sent, held for 10 minutes, fires. Then the load it is sent
        # stays above what it may queue: a capacity problem, not a fault. Refusals over refusals and
        # successes: an engine refusing everything reads 100 %, one idle reads nothing.
        f"sum without (engine, reason) (rate({total(Engine.ADMISSION_REJECTIONS)}[5m]))\n/\n(\n"
        f"  sum without (engine, reason) (rate({total(Engine.ADMISSION_REJECTIONS)}[5m]))\n  +\n"
        f"  sum without (engine, finished_reason) (rate({total(Engine.REQUEST_SUCCESS)}[5m]))\n"
        ")\n> 0.01\n",
        "warning", "vLLM is refusing requests at its admission limits.",
        "{{ $labels.target }} ({{ $labels.model }}) has refused {{ $value | humanizePercentage }} of the requests "
        "sent to it for 10 minutes (HTTP 503 at --max-num-queued-reqs or --max-num-queued-tokens): it is sent more "
        "than it may queue.",
        "10m"),
    Alert(
        "VLLMSpecDecodeAcceptanceLow",
        f"{ENGINE_LEVEL}:{Engine.SPEC_ACCEPTANCE_RATIO.removesuffix('_ratio')}:ratio_rate5m < 0.3",
        "warning", "Speculative decoding acceptance is low.",
        "Only {{ $value | humanizePercentage }} of draft tokens are accepted on {{ $labels.target }} "
        "({{ $labels.model }}); speculation costs more than it saves.",
        "10m"),
    Alert(
        "VLLMEngineAsleep",
        # vLLM's sleep mode frees the GPU for other work; an engine put to sleep while requests are
        # in it or queued serves none of them until it is woken (POST /wake_up).
        f"max without (engine) ({Engine.SLEEP_LEVEL}) > 0\nand\n"
        f"sum without (engine) ({Engine.REQUESTS_WAITING} + {Engine.REQUESTS_RUNNING}) > 0\n",
        "warning", "A vLLM engine is asleep with requests to serve.",
        "{{ $labels.target }} ({{ $labels.model }}) has been asleep (level {{ $value }}) for 1 minute with "
        "requests running or waiting; wake it with POST /wake_up.",
        "1m"),
    Alert(
        "LoadwatchSidecarDown",
        # Without the sidecar every engine series vanishes and VLLMEngineDown cannot fire: watch the
        # watcher. `absent` covers a sidecar gone from service discovery altogether. The job name is
        # prometheus.yml's (and the ServiceMonitor's relabelling).
        'up{job="loadwatch-engine"} == 0 or absent(up{job="loadwatch-engine"})',
        "warning", "The loadwatch sidecar is down or missing.",
        "Prometheus has scraped no loadwatch sidecar of job {{ $labels.job }}{{ if $labels.instance }} at "
        "{{ $labels.instance }}{{ end }} for 2 minutes; engine alerts such as VLLMEngineDown cannot fire "
        "without it.",
        "2m"),
    Alert(
        "Watchdog", "vector(1)", "none",
        "The alert path works: this alert always fires.",
        "Always firing (value {{ $value }}): Prometheus evaluates loadwatch's rules and its alerts reach "
        "Alertmanager. Route it to a dead man's switch: when it stops arriving, alerting is broken.",
    ),
)


def runbook_base() -> str:
    return os.environ.get(RUNBOOK_BASE_ENV) or DEFAULT_RUNBOOK_BASE


def rule(alert: Alert, base: str) -> dict:
    out: dict = {"alert": alert.name, "expr": alert.expr}
    if alert.for_ != "0s":
        out["for"] = alert.for_
    out["labels"] = {"severity": alert.severity}
    out["annotations"] = {"summary": alert.summary, "description": alert.description,
                          "runbook_url": f"{base.rstrip('/')}#{alert.anchor}"}
    return out


def header(base: str) -> str:
    width = max(len(a.name) for a in ALERTS)
    lines = [f"#   {a.name.ljust(width)}  {a.severity:<8}  {'for ' + a.for_ if a.for_ != '0s' else 'always'}"
             for a in ALERTS]
    return ("# loadwatch's alerts: symptoms page (critical), causes warn (warning), Watchdog always fires.\n"
            "# Generated by `python -m loadwatch.rules` from src/loadwatch/rules/alerts.py: edit that, not this.\n"
            f"# Runbooks: docs/runbooks.md, published at {base}.\n" + "\n".join(lines) + "\n")


def render(base: str | None = None) -> str:
    base = base or runbook_base()
    groups = {"groups": [{"name": "loadwatch-alerts", "rules": [rule(a, base) for a in ALERTS]}]}
    return header(base) + yamlblock.dump(groups, width=1000)
