"""Why a fleet's router did not keep a prefix on one replica, from its own counters over a level's
window (pure, but for `router_figures`, which reads them from Prometheus).

vllm-router 0.1.17's cache_aware reads no prompt text: for each request it asks every replica's
/v1/chat/completions/render (then /tokenize) for the prompt's tokens, and where that fails or is slow
it routes by load and counts the decision as `missing_tokens`; a prefix no replica holds enough of
(under --cache-threshold) is `prefix_miss`, and a load gap past its balance thresholds that overrides
the prefix is `load_imbalance`. Its consistent_hash and sticky_least_loaded hash a key header; a
request without one goes where every other key-less request goes, so a workload that sends none puts
the whole load on one replica; loadwatch's client sends X-Request-Id, one of those keys, unique to
each request, so the hash spreads a prefix's requests instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from loadwatch.catalogue import Router, total
from loadwatch.prometheus import PrometheusAPI

# The outcomes that routed a request by load instead of by its prefix, and why, in a user's words.
REASONS = {
    "missing_tokens": "the router could not read the prompts' tokens: vllm-router's cache_aware asks every "
                      "replica's /v1/chat/completions/render (then /tokenize) for them, and where that fails or "
                      "takes about 1 s it routes by load (smg's cache_aware reads the prompt's text itself)",
    "prefix_miss": "no replica held enough of a prompt's prefix (under the router's --cache-threshold), so it "
                   "routed by load",
    "load_imbalance": "the replicas' loads differed past the router's balance thresholds (--balance-abs-threshold, "
                      "--balance-rel-threshold), so it routed by load over the prefix",
}
HASH_POLICIES = ("consistent_hash", "sticky_least_loaded")
# The headers vllm-router 0.1.17 hashes a request by; without any, every request hashes alike.
KEY_HEADERS = ("x-session-id", "x-user-id", "x-tenant-id", "x-request-id", "x-correlation-id", "x-trace-id")


def prefix_reason(outcomes: dict[str, float]) -> dict | None:
    """The outcome that most often routed a request by load instead of by its prefix, with the
    counts of every outcome as evidence; None where none did (the prefixes held, or the router
    counts no prefix-aware decisions)."""
    by_load = {outcome: n for outcome in REASONS if (n := outcomes.get(outcome) or 0) > 0}
    if not by_load:
        return None
    reason = max(by_load, key=lambda outcome: by_load[outcome])
    return {"routing_reason": reason, "prefix_decisions": {k: round(v) for k, v in sorted(outcomes.items())},
            "by_load_share": sum(by_load.values()) / sum(outcomes.values()),
            "why": f"{REASONS[reason]} ({round(by_load[reason])} of {round(sum(outcomes.values()))} decisions "
                   f"{reason})"}


def hash_reason(policy: str | None, sent: dict[str, float], headers: Iterable[str]) -> dict | None:
    """Why a hash policy kept no prefix on one replica (`headers`: those the workload sends): with no
    key header, every request hashed alike and went to one replica; with only X-Request-Id, each
    request hashed by its own id and a prefix's requests spread as if at random. None otherwise."""
    keys = {h.lower() for h in headers} & set(KEY_HEADERS)
    if policy not in HASH_POLICIES or len(sent) < 2 or keys - {"x-request-id"}:
        return None
    counts = {k: round(v) for k, v in sorted(sent.items())}
    if keys:
        return {"routing_reason": "per_request_key", "router_policy": policy, "replica_requests": counts,
                "why": f"{policy} hashed each request by its own X-Request-Id, so a prefix's requests spread over "
                       "the replicas; a session header (x-session-id, x-user-id) shared by a prefix's requests "
                       "would keep them together"}
    served = [replica for replica, n in sent.items() if n > 0]
    if len(served) != 1:
        return None
    return {"routing_reason": "no_hash_key", "router_policy": policy, "replica_requests": counts,
            "why": f"{policy} sent every request to {served[0]}: the workload sent none of the headers it hashes, so "
                   f"every request hashed alike; send one of {', '.join(KEY_HEADERS)} (a session's or a user's "
                   "id keeps its requests together and spreads the sessions)"}


def router_figures(api: PrometheusAPI, start: float, end: float) -> dict:
    """The router's counts over the window: its prefix-aware decisions by outcome, and its sends by
    policy and replica (the policy: the one that decided most)."""
    window = f"{max(1, math.ceil(end - start))}s"
    outcomes = {s["metric"].get("outcome", ""): float(s["value"][1]) for s in api.query(
        f"sum by (outcome) (increase({total(Router.PREFIX_DECISIONS)}[{window}]))", end)}
    by_policy: dict[str, dict[str, float]] = {}
    for s in api.query(f"sum by (policy, replica) (increase({total(Router.POLICY_DECISIONS)}[{window}]))", end):
        by_policy.setdefault(s["metric"].get("policy", ""), {})[s["metric"].get("replica", "")] = float(s["value"][1])
    policy = max(by_policy, key=lambda p: sum(by_policy[p].values()), default=None)
    return {"outcomes": {k: v for k, v in outcomes.items() if v == v},
            "policy": policy, "sent": by_policy.get(policy, {}) if policy else {}}


def reasons(figures: dict | None, headers: Iterable[str]) -> dict | None:
    """Why the router did not keep prefixes together, from `router_figures`: a key-less hash first (it
    decides alone), else the prefix-aware decisions' commonest reason."""
    if not figures:
        return None
    return hash_reason(figures.get("policy"), figures.get("sent") or {}, headers) \
        or prefix_reason(figures.get("outcomes") or {})
