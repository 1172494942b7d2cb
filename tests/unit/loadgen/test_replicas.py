"""A fleet's requests, each to the replica that served it: from the answer's system_fingerprint, through
the recorder (exact across workers), to the results' per-replica figures."""

from __future__ import annotations

import logging

import pytest

from loadwatch.client.chunks import parse_chunk
from loadwatch.loadgen.process import Process
from loadwatch.loadgen.recorder import LLMRequest, Recorder
from loadwatch.loadgen.replica_watch import Outage, ReplicaWatch, outage_figures
from loadwatch.loadgen.state import RunState
from loadwatch.loadgen.webui.tab import tab_rows
from loadwatch.metrics.results import Results
from loadwatch.metrics.summary import format_replicas, replica_figures
from loadwatch.metrics.timing import RawTiming, request_metrics
from loadwatch.settings import LoadSettings, ReplicaNames

USAGE = ('{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"tiny","choices":[],'
         '"usage":{"prompt_tokens":8,"total_tokens":12,"completion_tokens":4},"system_fingerprint":%s}')


def test_the_usage_chunk_carries_the_replicas_fingerprint_and_a_garbled_one_is_none():
    assert parse_chunk(USAGE % '"b"', "chat").fingerprint == "b"
    assert parse_chunk(USAGE % "null", "chat").fingerprint is None
    assert parse_chunk(USAGE % "7", "chat").fingerprint is None
    timing = RawTiming(0.0, (0.1, 0.2), 8, 2, served_by="b")
    assert request_metrics(timing).served_by == "b"


def process(*replicas: str) -> Process:
    return Process(LoadSettings(replica=list(replicas)), RunState(["chat"], "http://127.0.0.1:8000"))


def test_a_replica_is_one_of_the_names_given_and_an_unknown_fingerprint_is_said_once(caplog):
    fleet = process("a=http://127.0.0.1:8001", "b")
    assert fleet.replica_of("a") == "a" and fleet.replica_of("b") == "b" and fleet.replica_of(None) is None
    with caplog.at_level(logging.WARNING):
        assert fleet.replica_of("vllm-0.32.0-4dbb0481") is None
        assert fleet.replica_of("vllm-0.32.0-4dbb0481") is None
    said = [r for r in caplog.records if "--fingerprint-value" in r.getMessage()]
    assert len(said) == 1 and "'vllm-0.32.0-4dbb0481'" in said[0].getMessage()
    assert process().replica_of("a") is None, "outside a fleet, no request names a replica"


def test_the_replica_a_router_names_by_its_url_in_a_header_is_taken_before_the_fingerprint():
    """smg says on every answer which worker (its URL) it sent the request to: with --replica NAME=URL
    that names the replica though it answers with vLLM's own fingerprint, the same on every replica."""
    fleet = process("a=http://127.0.0.1:8001/", "b=http://127.0.0.1:8002")
    assert fleet.replica_of("vllm-0.32.0-4dbb0481", "http://127.0.0.1:8002") == "b"
    assert fleet.replica_of(None, "http://127.0.0.1:8001") == "a", "a URL given with its trailing / is the same"
    assert fleet.replica_of("a", "http://127.0.0.1:9999") == "a", "a URL no replica has: the fingerprint says"
    assert process("vllm-*").replica_of("vllm-5d8c7b9f4-x2x7k", "http://10.0.3.7:8000") == "vllm-5d8c7b9f4-x2x7k"
    assert process().replica_of(None, "http://127.0.0.1:8001") is None, "outside a fleet, no request names a replica"


def test_a_pattern_names_the_replicas_that_come_and_go_but_never_vllms_own_fingerprint():
    pods = process("vllm-*")
    assert pods.replica_of("vllm-5d8c7b9f4-x2x7k") == "vllm-5d8c7b9f4-x2x7k"
    assert pods.replica_of("router-0") is None
    anyone = process("*")
    assert anyone.replica_of("b") == "b"
    assert anyone.replica_of("vllm-0.32.0-4dbb0481") is None, "vLLM's default fingerprint is the same on every replica"
    assert anyone.replicas.listed({"b", "c"}) == {"b", "c"}
    assert process("a", "*").replicas.listed({"c"}) == {"a", "c"}, "a named replica is listed though it served none"
    with pytest.raises(ValueError, match="takes no URL"):
        LoadSettings(replica=["vllm-*=http://x:1"])


def test_replica_names_are_needed_once_each():
    with pytest.raises(ValueError, match="names once"):
        LoadSettings(replica=["a=http://x:1", "a=http://y:1"])
    with pytest.raises(ValueError, match="a name each"):
        LoadSettings(replica=["=http://x:1"])


def served(replica: str | None, ttft: float, started: float = 100.0) -> LLMRequest:
    m = request_metrics(RawTiming(started, (started + ttft, started + ttft + 0.1), 8, 2))
    return LLMRequest("tiny", "chat", started, ttft + 0.1, m, replica=replica)


def test_per_replica_samples_merge_exactly_from_workers_and_the_records_name_the_replica():
    worker1, worker2, master = Recorder(), Recorder(), Recorder()
    for worker in (worker1, worker2):
        worker.keep_records = True
    worker1.record(served("a", 0.1))
    worker1.record(served("b", 0.5))
    worker2.record(served("a", 0.2))
    worker2.record(LLMRequest("tiny", "chat", 100.0, 1.0, None, failure_reason="http_503"))
    master.keep_records = True
    for worker in (worker1, worker2):
        master.merge(worker.report())
    assert master.by_replica.of(("a",)).completed == 2 and master.by_replica.of(("b",)).completed == 1
    assert [r.get("replica") for r in master.records] == ["a", "b", "a", None]

    fleet = replica_figures(master.by_replica, frozenset({"a", "b", "c"}), duration=10.0)
    assert fleet["replicas"]["a"]["share"] == pytest.approx(2 / 3) and fleet["replicas"]["c"]["completed"] == 0
    assert fleet["replicas"]["a"]["request_throughput"] == pytest.approx(0.2), "over the run's window"
    assert fleet["busiest_share_ratio"] == pytest.approx(2 * 3 / 3), "a took twice an even third"
    result = Results.model_validate({"run_id": "r", "started_at": 0, "ended_at": 1, "completed": 3, **fleet,
                                     "unattributed": 1})
    lines = format_replicas(result)
    assert lines[0].startswith("a: 2 (67%), TTFT median/p99 ") and lines[2].startswith("c: 0 (0%)")
    assert any("Served by no named replica:" in line and line.rstrip().endswith("1") for line in lines)


def sidecar(b_up: int, a_sent: int, b_sent: int) -> str:
    return ("# TYPE loadwatch_engine_up gauge\n"
            f'loadwatch_engine_up{{target="a"}} 1\nloadwatch_engine_up{{target="b"}} {b_up}\n'
            "# TYPE loadwatch_router_replica_requests counter\n"
            f'loadwatch_router_replica_requests_total{{router="r",replica="a"}} {a_sent}\n'
            f'loadwatch_router_replica_requests_total{{router="r",replica="b"}} {b_sent}\n')


def test_a_lost_replica_is_named_with_when_the_router_stopped_sending_to_it_and_when_it_came_back():
    readings = iter([sidecar(1, 10, 10), sidecar(0, 12, 12), sidecar(0, 15, 13), sidecar(0, 19, 13),
                     sidecar(0, 23, 13), sidecar(1, 25, 14)])
    watch = ReplicaWatch("http://sidecar/metrics", ReplicaNames(frozenset({"a", "b"})),
                         fetch=lambda _url: next(readings))
    for second in range(100, 106):
        watch.read_once(float(second))
    (outage,) = watch.outages
    assert (outage.replica, outage.lost_at, outage.last_sent_at, outage.back_at) == ("b", 101.0, 102.0, 105.0)


def test_an_unread_sidecar_or_a_replica_never_up_is_no_outage():
    def fail(_url: str) -> str:
        raise OSError("refused")

    watch = ReplicaWatch("http://sidecar/metrics", ReplicaNames(frozenset({"a", "b"})), fetch=fail)
    watch.read_once(100.0)
    starting = ReplicaWatch("u", ReplicaNames(frozenset({"b"})), fetch=lambda _url: sidecar(0, 0, 0))
    starting.read_once(100.0)
    assert watch.outages == [] and starting.outages == []


def test_an_outages_failures_are_those_until_the_clients_success_rate_recovered():
    outcomes = {s: [5, 0] for s in range(90, 120)}
    # seen lost at 100.4, its first failures a second before; the last at 103; one long before, not its
    outcomes.update({80: [4, 1], 99: [4, 1], 100: [3, 2], 101: [3, 2], 103: [4, 1]})
    figures = outage_figures(Outage("b", 100.4, last_sent_at=103.2), outcomes, ended_at=119.0)
    assert figures["failed_in_window"] == 6 and figures["recovered_after_s"] == pytest.approx(3.6)
    assert figures["router_stopped_after_s"] == pytest.approx(2.8)
    retried = outage_figures(Outage("b", 100.4), {s: [5, 0] for s in range(90, 120)}, ended_at=119.0)
    assert (retried["failed_in_window"], retried["recovered_after_s"], retried["router_stopped_after_s"]) == (0, 0, 0)
    # Seen lost a second after its in-flight requests failed, with clean seconds before them: those are
    # not its recovery (the e2e run showed it: 2 cut streams, 0 counted).
    cut = {s: [5, 0] for s in range(90, 120)} | {100: [3, 2]}
    assert outage_figures(Outage("b", 100.9), cut, ended_at=119.0)["failed_in_window"] == 2
    still = outage_figures(Outage("b", 100.4, last_sent_at=118.5), outcomes, ended_at=119.0)
    assert still["router_stopped_after_s"] is None, "still sending to it at the end"


def test_a_failure_whose_answer_named_its_replica_counts_against_that_replica_and_no_other():
    """Behind smg a failed request's answer names its replica (an error status passed on, a cut stream):
    its failure is that replica's, in the results and the web UI's rows; one that named none is only the
    run's, and a URL that is none of the replicas' names none."""
    fleet = process("a=http://127.0.0.1:8001", "b=http://127.0.0.1:8002")
    assert fleet.replica_of(None, "http://127.0.0.1:8002") == "b"
    assert fleet.replica_of(None, None) is None and fleet.replica_of(None, "http://127.0.0.1:9999") is None
    worker, master = Recorder(), fleet.state.recorder
    worker.keep_records = master.keep_records = True
    worker.record(served("a", 0.1))
    worker.record(served("b", 0.2))
    for replica, reason in (("b", "http_500"), ("b", "stream_error"), (None, "http_500")):
        worker.record(LLMRequest("tiny", "chat", 100.0, 1.0, None, failure_reason=reason, replica=replica))
    master.merge(worker.report())
    assert [r.get("replica") for r in master.records] == ["a", "b", "b", "b", None]

    figures = replica_figures(master.by_replica, frozenset({"a", "b"}), duration=10.0)
    a, b = figures["replicas"]["a"], figures["replicas"]["b"]
    assert (a["completed"], a["failed"], a["failures"]) == (1, 0, {})
    assert (b["completed"], b["failed"], b["failures"]) == (1, 2, {"http_500": 1, "stream_error": 1})
    assert b["failure_ratio"] == pytest.approx(2 / 3) and b["share"] == pytest.approx(0.5), "share: of successes"
    assert master.samples.total().completed - master.by_replica.total().completed == 0, "no success unattributed"
    rows = {row["name"]: row for row in tab_rows(fleet.state)}
    assert (rows["replica a"]["requests"], rows["replica a"]["failures"]) == (1, "")
    assert (rows["replica b"]["requests"], rows["replica b"]["failures"]) == (3, 2)
    assert rows["chat (tiny)"]["failures"] == 3
    lines = format_replicas(Results.model_validate({"run_id": "r", "started_at": 0, "ended_at": 1, "completed": 2,
                                                    "failed": 3, **figures}))
    assert lines[0].endswith(" ms") and lines[1].endswith(" ms, 2 failed"), lines
