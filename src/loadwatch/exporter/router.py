"""One router's /metrics payload in, loadwatch's router families out (pure; tested on vllm-router's
and smg's real payloads, tests/data/router/).

Each family lists the names routers give it, as the engine's schema lists vLLM's across versions: a
router of another kind adds its names here, where its series mean what the family means (and no
family takes a series that only looks alike: smg's worker_selection counts the policy's choices but
names no replica, so it is not POLICY_DECISIONS). A router names a replica by the URL it sends to; the
series name it as the sidecar's target with that URL (the name the engine's series carry), so that a
replica's router view and engine view join on `replica` = `target`.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from loadwatch.catalogue import Router


@dataclass(frozen=True)
class RouterFamily:
    name: str
    kind: str  # counter or gauge
    sources: tuple[str, ...]  # the routers' family names, as the parser gives them (counters without _total)
    help: str


FAMILIES = (
    RouterFamily(Router.REQUESTS, "counter", ("vllm_router_requests", "smg_router_requests"),
                 "Clients' requests the router took, by route (smg: by endpoint, model and streaming)."),
    RouterFamily(Router.REQUEST_ERRORS, "counter", ("vllm_router_request_errors", "smg_router_request_errors"),
                 "Requests the router answered with an error, by route (smg: endpoint) and error type."),
    RouterFamily(Router.RETRIES, "counter", ("vllm_router_retries", "smg_worker_retries"),
                 "Requests the router sent again after a replica failed them, by route (smg: endpoint)."),
    RouterFamily(Router.REPLICA_REQUESTS, "counter", ("vllm_router_processed_requests", "smg_worker_requests"),
                 "Requests the router sent to each replica, failed tries included."),
    RouterFamily(Router.REPLICA_HEALTHY, "gauge", ("vllm_router_worker_health", "smg_worker_health"),
                 "1 while the router's health checks find the replica healthy, 0 once they mark it unhealthy."),
    RouterFamily(Router.REPLICA_RUNNING, "gauge", ("vllm_router_running_requests", "smg_worker_requests_active"),
                 "Requests running on each replica as the router counts them (vllm-router: load-aware policies)."),
    RouterFamily(Router.REPLICA_CIRCUIT_BREAKER, "gauge", ("vllm_router_cb_state", "smg_worker_cb_state"),
                 "The router's circuit breaker for the replica: 0 closed (sending), 1 open, 2 half-open."),
    RouterFamily(Router.REPLICA_CIRCUIT_BREAKER_OUTCOMES, "counter", ("vllm_router_cb_outcomes",),
                 "The tries the router's circuit breaker counted for each replica, by outcome (success, failure)."),
    RouterFamily(Router.REPLICAS_ACTIVE, "gauge", ("vllm_router_active_workers", "smg_worker_pool_size"),
                 "Replicas the router sends to (smg: by model)."),
    RouterFamily(Router.POLICY_DECISIONS, "counter", ("vllm_router_policy_decisions",),
                 "The routing policy's choices, by policy and replica."),
    RouterFamily(Router.CACHE_HITS, "counter", ("vllm_router_cache_hits",),
                 "Cache-aware routing: requests whose prompt prefix the router found on a replica."),
    RouterFamily(Router.CACHE_MISSES, "counter", ("vllm_router_cache_misses",),
                 "Cache-aware routing: requests whose prompt prefix no replica held."),
    RouterFamily(Router.PREFIX_DECISIONS, "counter", ("vllm_router_prefix_routing_decisions",
                                                      "smg_cache_aware_policy_branch", "smg_prefix_hash_policy_branch"),
                 "Prefix-aware routing's decisions by policy, stage and outcome (vllm-router: prefix_hit, "
                 "prefix_miss, load_imbalance; missing_tokens: it could not read the prompt's tokens and routed "
                 "by load. smg's cache_aware: tree_match, spill, expected_wait_fallback, ...; its prefix_hash: "
                 "ring_hit, load_balance_walk, ...)."),
)
REPLICA_LABELS = ("worker",)  # the labels routers name a replica by
# smg counts each prefix-aware policy's decisions in a family of its own, by `branch`: that is
# loadwatch's `outcome`, and the family says the `policy`.
RENAMED = {"smg_cache_aware_policy_branch": {"branch": "outcome"},
           "smg_prefix_hash_policy_branch": {"branch": "outcome"}}
IMPLIED = {"smg_cache_aware_policy_branch": {"policy": "cache_aware"},
           "smg_prefix_hash_policy_branch": {"policy": "prefix_hash"}}


def _url(url: str) -> str:
    return url.rstrip("/")


def normalize_router(text: str, router: str, replicas: dict[str, str]) -> list[Metric]:
    """`replicas`: the sidecar's targets, URL -> name. ValueError when the payload holds no router
    metrics loadwatch knows (not a router's /metrics, or a router of a kind it does not read)."""
    parsed = {family.name: family for family in text_string_to_metric_families(text)}
    by_url = {_url(url): name for url, name in replicas.items()}
    out = []
    for family in FAMILIES:
        sources = [parsed[name] for name in family.sources if name in parsed]
        if not sources:
            continue
        metric = Metric(family.name, family.help, family.kind)
        for source in sources:
            renamed = RENAMED.get(source.name, {})
            for sample in source.samples:
                if sample.name.endswith("_created"):
                    continue
                labels = {"router": router, **IMPLIED.get(source.name, {})}
                for key, value in sample.labels.items():
                    if key in REPLICA_LABELS:
                        labels["replica"] = by_url.get(_url(value), value)
                    else:
                        labels[renamed.get(key, key)] = value
                metric.add_sample(family.name + sample.name[len(source.name):], labels, sample.value)
        out.append(metric)
    if not out:
        raise ValueError("no router metrics loadwatch reads in the payload (is this a router's --prometheus-port, "
                         "vllm-router's or smg's?)")
    return out
