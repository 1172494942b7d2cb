"""The autoscaling rule a capacity search implies: the signal to scale on, its threshold per replica
read at the knee, and the rule written for the shipped Kubernetes manifests as a KEDA ScaledObject
and as an HPA (with the prometheus-adapter rule that serves the HPA its metric).

The threshold is the signal's mean per replica over the highest level that held its SLOs: an
autoscaler that keeps every replica at or below it keeps each one at a load the search saw held.
The signal follows the limit: the KV cache's usage where the cache binds, else the requests in the
engine (running and waiting), which grows with the load whatever else binds and is what a request
queue-based autoscaler (Knative's concurrency, llm-d's saturation) watches. docs/guides/fleet.md
says what the rule assumes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from loadwatch.atomic import write_atomically
from loadwatch.capacity.levels import Level
from loadwatch.catalogue import Engine
from loadwatch.metrics.capacity import Autoscaling
from loadwatch.prometheus import PrometheusAPI, PrometheusError

FOLDER = "autoscaling"
NAMESPACE = "loadwatch"  # the shipped manifests'
DEPLOYMENT = "vllm"
# Where KEDA finds the Prometheus that scrapes the sidecars: the Operator's service for a Prometheus
# named `prometheus` in `monitoring` (kube-prometheus-stack's is alike); the page says to set yours.
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
# The name prometheus-adapter serves the HPA for running plus waiting, per pod: no family loadwatch
# exports (catalogue.py lists those), so not one of its names.
IN_ENGINE = "requests_in_engine"
SEPARATES = 1.2  # the signal at the broken level at least this much above the held one, else said to be weak


@dataclass(frozen=True)
class Signal:
    name: str  # in words
    metric: str  # the HPA's Pods metric, as prometheus-adapter serves it
    per_replica: bool  # True: a sum over the replicas, KEDA divides by their count (AverageValue)

    def query(self, selector: str) -> str:
        """The fleet-wide PromQL over the series `selector` picks: the sum of the replicas' values (a
        count of requests), or their mean (a ratio)."""
        if self.per_replica:
            return f"sum({Engine.REQUESTS_RUNNING}{selector}) + sum({Engine.REQUESTS_WAITING}{selector})"
        return f"avg({Engine.KV_CACHE_USAGE}{selector})"

    def window_query(self, selector: str, seconds: int) -> str:
        """Its mean over the `seconds` before the evaluation time, per replica for a sum."""
        if self.per_replica:
            return (f"sum(avg_over_time({Engine.REQUESTS_RUNNING}{selector}[{seconds}s])) + "
                    f"sum(avg_over_time({Engine.REQUESTS_WAITING}{selector}[{seconds}s]))")
        return f"avg(avg_over_time({Engine.KV_CACHE_USAGE}{selector}[{seconds}s]))"


IN_ENGINE_SIGNAL = Signal("requests in the engine (running and waiting) per replica", IN_ENGINE, True)
KV_SIGNAL = Signal("KV cache usage (0 to 1), the replicas' mean", Engine.KV_CACHE_USAGE, False)


def signal_for(limit: str | None, evidence: dict) -> Signal:
    binding = evidence.get("replica_limit") if limit == "replicas" else limit
    return KV_SIGNAL if binding == "kv_cache" else IN_ENGINE_SIGNAL


def selector(names: list[str]) -> str:
    """The stack's sidecar names each replica (target); empty: every target."""
    return "{target=~\"" + "|".join(names) + "\"}" if names else ""


def measured(api: PrometheusAPI, signal: Signal, level: Level, names: list[str], replicas: int) -> float | None:
    """The signal's mean per replica over the level's window, as the stack's Prometheus has it."""
    seconds = max(1, math.ceil(level.end - level.start))
    try:
        value = api.scalar(signal.window_query(selector(names), seconds), level.end)
    except PrometheusError:
        return None
    if value is None:
        return None
    return value / replicas if signal.per_replica else value


def rule(api: PrometheusAPI, limit: str | None, evidence: dict, held: Level | None, broke: Level | None,
         names: list[str], replicas: int) -> Autoscaling | None:
    """The rule, or None where no level held (there is no knee to read a threshold at)."""
    if held is None:
        return None
    signal = signal_for(limit, evidence)
    threshold = measured(api, signal, held, names, replicas)
    if threshold is None or threshold <= 0:
        return None
    at_broken = measured(api, signal, broke, names, replicas) if broke else None
    digits = 2 if signal.per_replica else 3
    return Autoscaling(
        signal=signal.name,
        metric=signal.metric,
        query=signal.query(f'{{namespace="{NAMESPACE}"}}'),
        threshold=round(threshold, digits),
        per_replica=signal.per_replica,
        held_level=held.value,
        broken_level=broke.value if broke else None,
        at_broken_level=None if at_broken is None else round(at_broken, digits),
        separates=at_broken is not None and at_broken >= SEPARATES * threshold,
        replicas_measured=replicas,
    )


def scaled_object(found: Autoscaling, most: int) -> dict:
    """KEDA's ScaledObject for the shipped vLLM Deployment: its Prometheus trigger (AverageValue: KEDA
    divides the fleet's sum by the replicas; Value: the replicas' mean against the threshold)."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
        "spec": {
            "scaleTargetRef": {"name": DEPLOYMENT},
            "minReplicaCount": 1,
            "maxReplicaCount": most,
            "triggers": [{
                "type": "prometheus",
                "metricType": "AverageValue" if found.per_replica else "Value",
                "metadata": {"serverAddress": PROMETHEUS, "query": found.query,
                             "threshold": f"{found.threshold:g}"},
            }],
        },
    }


def hpa(found: Autoscaling, most: int) -> dict:
    """The same rule as an autoscaling/v2 HPA on a Pods metric (each pod's own value, averaged)."""
    millis = round(found.threshold * 1000)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": DEPLOYMENT},
            "minReplicas": 1,
            "maxReplicas": most,
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": found.metric},
                                                  "target": {"type": "AverageValue", "averageValue": f"{millis}m"}}}],
        },
    }


def adapter_rules(found: Autoscaling) -> dict:
    """prometheus-adapter's rule that serves the HPA its per-pod metric, from the sidecars' series."""
    matchers = "<<.LabelMatchers>>"
    if found.per_replica:
        query = (f"sum by (<<.GroupBy>>) ({Engine.REQUESTS_RUNNING}{{{matchers}}}) + "
                 f"sum by (<<.GroupBy>>) ({Engine.REQUESTS_WAITING}{{{matchers}}})")
        series = Engine.REQUESTS_RUNNING
    else:
        query = f"avg by (<<.GroupBy>>) ({Engine.KV_CACHE_USAGE}{{{matchers}}})"
        series = Engine.KV_CACHE_USAGE
    return {"rules": [{
        "seriesQuery": f'{series}{{namespace!="",pod!=""}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"as": found.metric},
        "metricsQuery": query,
    }]}


def write(run_dir: Path, found: Autoscaling, most: int) -> list[Path]:
    """The three files, each with a header saying where it came from and what to change."""
    folder = run_dir / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    said = (f"# From loadwatch capacity ({run_dir.name}): {found.signal} at {found.threshold:g}, its mean over\n"
            f"# the highest level that held its SLOs ({found.held_level:g}). maxReplicas: as many as your "
            "cluster holds.\n")
    files = {
        "keda-scaledobject.yaml": (said + "# KEDA: set serverAddress to your Prometheus.\n",
                                   scaled_object(found, most)),
        "hpa.yaml": (said + "# The HPA reads the metric from prometheus-adapter (prometheus-adapter-rules.yaml).\n",
                     hpa(found, most)),
        "prometheus-adapter-rules.yaml": ("# prometheus-adapter's config (its `rules`): the HPA's per-pod metric.\n",
                                          adapter_rules(found)),
    }
    written = []
    for name, (header, document) in files.items():
        write_atomically(folder / name, header + yaml.safe_dump(document, sort_keys=False))
        written.append(folder / name)
    return written
