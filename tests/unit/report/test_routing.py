"""Why a fleet's router kept no prefix on one replica, from its counters' values (vllm-router
0.1.17's, recorded in front of two test replicas without /v1/chat/completions/render)."""

from loadwatch.report.explain import router_story
from loadwatch.report.routing import KEY_HEADERS, hash_reason, prefix_reason, reasons

# tests/data/router/vllm-router-0.1.17-cache-aware.txt: every decision routed by load, the render missing.
RENDERLESS = {"missing_tokens": 137.0}


def test_the_commonest_decision_by_load_is_the_reason_with_every_count_as_evidence():
    found = prefix_reason(RENDERLESS)
    assert found["routing_reason"] == "missing_tokens" and found["prefix_decisions"] == {"missing_tokens": 137}
    assert "/v1/chat/completions/render" in found["why"] and "137 of 137 decisions missing_tokens" in found["why"]
    mixed = prefix_reason({"prefix_hit": 50.0, "prefix_miss": 30.0, "load_imbalance": 12.0})
    assert mixed["routing_reason"] == "prefix_miss" and "--cache-threshold" in mixed["why"]
    assert mixed["by_load_share"] == 42 / 92
    assert prefix_reason({"prefix_hit": 2.0, "load_imbalance": 9.0})["routing_reason"] == "load_imbalance"
    assert prefix_reason({"prefix_hit": 40.0}) is None, "every prefix held"
    assert prefix_reason({}) is None, "a policy that counts no prefix-aware decisions"


def test_a_hash_without_its_key_sends_everything_to_one_replica_and_names_the_headers():
    found = hash_reason("consistent_hash", {"a": 120.0, "b": 0.0}, ())
    assert found["routing_reason"] == "no_hash_key" and found["replica_requests"] == {"a": 120, "b": 0}
    assert "sent every request to a" in found["why"] and all(h in found["why"] for h in KEY_HEADERS)
    assert hash_reason("sticky_least_loaded", {"a": 7.0}, ()) is None, "one replica: nothing to collapse onto"
    assert hash_reason("consistent_hash", {"a": 60.0, "b": 60.0}, ()) is None, "spread: not collapsed"
    assert hash_reason("round_robin", {"a": 120.0, "b": 0.0}, ()) is None, "not a hash"
    assert hash_reason("consistent_hash", {"a": 120.0, "b": 0.0}, ("X-Session-Id",)) is None, "a key: its choice"


def test_loadwatchs_own_request_id_hashes_each_request_apart():
    """Measured: consistent_hash sent 7 and 3 of 10 requests, each with its own X-Request-Id."""
    found = hash_reason("consistent_hash", {"a": 7.0, "b": 3.0}, ("X-Request-Id",))
    assert found["routing_reason"] == "per_request_key" and "x-session-id" in found["why"]


def test_a_key_less_hash_decides_before_the_prefix_counts():
    figures = {"policy": "consistent_hash", "sent": {"a": 10.0, "b": 0.0}, "outcomes": RENDERLESS}
    assert reasons(figures, ())["routing_reason"] == "no_hash_key"
    assert reasons({**figures, "policy": "cache_aware"}, ("X-Request-Id",))["routing_reason"] == "missing_tokens"
    assert reasons(None, ()) is None and reasons({"policy": None, "sent": {}, "outcomes": {}}, ()) is None


class Recorded:
    """Prometheus's answers to the two queries, as the sidecar's series would give them."""

    def query(self, expr: str, at: float) -> list:
        if "prefix_routing_decisions" in expr:
            return [{"metric": {"outcome": "missing_tokens"}, "value": [at, "40"]}]
        return [{"metric": {"policy": "cache_aware", "replica": "a"}, "value": [at, "40"]},
                {"metric": {"policy": "cache_aware", "replica": "b"}, "value": [at, "0"]}]


def test_the_routers_figures_over_a_window():
    from loadwatch.report.routing import router_figures

    figures = router_figures(Recorded(), 100.0, 160.0)
    assert figures == {"outcomes": {"missing_tokens": 40.0}, "policy": "cache_aware", "sent": {"a": 40.0, "b": 0.0}}
    assert reasons(figures, ("X-Request-Id",))["routing_reason"] == "missing_tokens"


def test_explain_tells_the_routers_reason_over_the_run():
    (blank, line) = router_story(Recorded(), 100.0, 160.0, [{"prefix": 0, "replica": "a"}])
    assert blank == "" and "reason missing_tokens (missing_tokens 40)" in line and "/render" in line
