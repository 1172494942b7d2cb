"""A fault's figures in the results (loadgen/faults.py): what the client saw a second, when the SLOs
held again, and what the router's retries and circuit breaker did meanwhile."""

from __future__ import annotations

import json

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from loadwatch.catalogue import Router
from loadwatch.exporter.router import normalize_router
from loadwatch.fleet.faults import FAULTS
from loadwatch.loadgen.faults import fault_figures, run_faults, served_well
from loadwatch.loadgen.replica_watch import ReplicaWatch, RouterReading, read
from loadwatch.metrics.slo import held_since
from loadwatch.settings import ReplicaNames
from tests.conftest import REPO

KILL = {"at_s": 30.0, "action": "kill", "replica": "b", "duration_s": None, "asked": 100.4, "effective_s": 0.1,
        "ended": None, "error": None}


def test_a_second_serves_well_when_every_request_in_it_succeeded_within_the_slos():
    assert served_well([3, 0, 0]) is True
    assert served_well([3, 1, 0]) is False and served_well([3, 0, 1]) is False
    assert served_well([0, 0, 0]) is None and served_well([2, 0]) is True  # a tally of before the SLO count


def test_the_slos_hold_again_from_the_first_window_every_later_one_holds():
    assert held_since([(0, True), (1, False), (2, True), (3, None), (4, True)]) == 2
    assert held_since([(0, True), (1, True)]) == 0
    assert held_since([(0, True), (1, False)]) is None and held_since([(0, None)]) is None


def test_a_kills_failures_recovery_and_the_routers_retries_are_counted_until_the_next_fault():
    outcomes = {s: [4, 0, 0] for s in range(95, 130)}
    outcomes |= {100: [3, 1, 0], 101: [2, 2, 0], 103: [4, 0, 2], 104: [4, 0, 0], 105: [3, 1, 0]}
    router = [RouterReading(99.5, True, 2.0, {"b": 0}, {"b": 0}), RouterReading(101.0, True, 5.0, {"b": 0}, {"b": 3}),
              RouterReading(103.0, True, 9.0, {"b": 1}, {"b": 5}), RouterReading(125.0, True, 9.0, {"b": 1}, {"b": 5}),
              RouterReading(127.0, True, 20.0, {"b": 1}, {"b": 5})]
    figures = fault_figures(KILL, 126.0, outcomes, router)
    assert figures["not_served"] == 4 and figures["outside_slo"] == 2  # from second 100 (its asking) to 126
    assert figures["slo_held_again_s"] == 5.6, "from second 106: none failed nor missed after the last that did"
    assert figures["router_retries"] == 7.0 and figures["breaker_failures"] == 5.0 and figures["breaker_opened"]
    assert figures["replica"] == "b" and figures["asked"] == 100.4


def test_a_counter_the_router_had_not_exposed_before_the_fault_counts_from_0():
    """vllm-router exposes its retries and a replica's breaker failures from their first count on."""
    quiet = [RouterReading(99.0, True), RouterReading(100.0, True)]
    router = [*quiet, RouterReading(102.0, True, 3.0, {"b": 1}, {"b": 3}), RouterReading(104.0, False)]
    figures = fault_figures(KILL, 110.0, {}, router)
    assert figures["router_retries"] == 3.0 and figures["breaker_failures"] == 3.0
    assert fault_figures(KILL, 110.0, {}, [RouterReading(102.0, False)])["router_retries"] is None, "never read"


def test_a_fault_the_client_never_saw_held_at_once_and_one_still_failing_at_the_end_never():
    calm = fault_figures(KILL, 110.0, {s: [4, 0, 0] for s in range(95, 115)}, [])
    assert calm["slo_held_again_s"] == 0.0 and calm["not_served"] == 0
    assert calm["router_retries"] is None and calm["breaker_opened"] is None, "no router reading: unknown, not 0"
    failing = fault_figures(KILL, 110.0, {s: [4, 1, 0] for s in range(95, 115)}, [])
    assert failing["slo_held_again_s"] is None and failing["not_served"] == 11


def test_the_faults_are_read_from_the_run_folder_each_until_the_next(tmp_path):
    assert run_faults(tmp_path, {}, [], 200.0) == []
    later = {**KILL, "action": "stop", "replica": "a", "duration_s": 5.0, "asked": 150.0}
    (tmp_path / FAULTS).write_text(json.dumps({"started_at": 70.0, "events": [KILL, later]}))
    outcomes = {149: [0, 3, 0], 151: [0, 2, 0]}  # the second one's failures are its own
    first, second = run_faults(tmp_path, outcomes, [], 200.0)
    assert (first["not_served"], second["not_served"]) == (3, 2)


class _Payload(Collector):
    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self):
        return self.families


def test_the_watch_reads_the_routers_retries_and_breaker_from_the_sidecar():
    """vllm-router 0.1.17's real payload after a replica was killed, as the sidecar serves it."""
    text = (REPO / "tests" / "data" / "router" / "vllm-router-0.1.17-worker-killed.txt").read_text()
    up = Metric(Router.UP, "the sidecar's last sample of the router succeeded", "gauge")
    up.add_sample(Router.UP, {"router": "vllm-router"}, 1.0)
    registry = CollectorRegistry()
    registry.register(_Payload([up, *normalize_router(text, "vllm-router", {"http://127.0.0.1:18001": "a",
                                                                             "http://127.0.0.1:18002": "b"})]))
    _up, sent, router = read(generate_latest(registry).decode(), at=5.0)
    assert router == RouterReading(5.0, True, 8.0, {"a": 0.0, "b": 0.0}, {"b": 8.0})
    assert sent["b"] > 0


def test_the_watch_keeps_the_routers_readings_where_they_changed_and_a_fault_reads_the_one_that_held():
    def payload(retries: int, state: int) -> str:
        return ("# TYPE loadwatch_router_up gauge\nloadwatch_router_up{router=\"r\"} 1\n"
                "# TYPE loadwatch_router_retries counter\n"
                f"loadwatch_router_retries_total{{router=\"r\",route=\"/v1/chat/completions\"}} {retries}\n"
                "# TYPE loadwatch_router_replica_circuit_breaker_state gauge\n"
                f"loadwatch_router_replica_circuit_breaker_state{{router=\"r\",replica=\"b\"}} {state}\n")

    readings = iter([payload(0, 0), payload(0, 0), payload(2, 1), payload(2, 1), payload(2, 1)])
    watch = ReplicaWatch("u", ReplicaNames(frozenset({"a", "b"})), fetch=lambda _url: next(readings))
    for second in range(100, 105):
        watch.read_once(float(second))
    assert [(r.at, r.retries) for r in watch.router] == [(100.0, 0.0), (102.0, 2.0)]
    later = fault_figures({**KILL, "asked": 103.5}, 110.0, {}, watch.router)
    assert later["breaker_opened"] is True and later["router_retries"] == 0.0, "open since before, no retry since"
