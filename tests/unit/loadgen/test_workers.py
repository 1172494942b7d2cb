"""The master's account of its workers, and what a lost one's results say (issue 40)."""

from __future__ import annotations

from loadwatch.loadgen.workers import Workers, host_of


def report(finished: int, in_flight: int = 0, warmup: int = 0, span: float = 0.0) -> dict:
    return {"finished": finished, "warmup_finished": warmup, "skipped": 0, "in_flight": [[["m", "chat"], in_flight]],
            "span": span}


def test_with_tickets_a_lost_workers_unknown_is_what_it_was_dealt_and_never_reported():
    workers = Workers()
    workers.granted("gpu-host-2_ab12", 40)
    workers.reported("gpu-host-2_ab12", report(20, in_flight=3, warmup=4), at=100.0)
    (lost,) = workers.lose({"gpu-host-2_ab12"}, counted=True, now=130.0)
    assert lost["unknown"] == 16 and lost["host"] == "gpu-host-2" and lost["last_heard"] == 100.0
    assert lost["unknown_counted_as"] == "tickets dealt minus outcomes reported" and workers.unknown() == 16


def test_in_a_timed_run_the_unknown_runs_at_its_last_rate_until_its_last_heartbeat_and_a_little_after():
    workers = Workers()
    workers.reported("h_1", report(30, span=2.0), at=100.0)
    assert workers.accounts["h_1"].rate == 15  # over the seconds the worker says its report spans
    workers.reported("h_1", report(30, in_flight=2, span=3.0), at=103.0)  # 10 a second
    workers.heartbeat("h_1", at=103.5)
    workers.heartbeat("h_1", at=102.0)  # a look that read an older count: the later stands
    (lost,) = workers.lose({"h_1"}, counted=False, now=120.0)
    assert lost["lost_at"] == 105.5 and lost["unknown"] == 2 + 25 and "estimate" in lost["unknown_counted_as"]


def test_a_worker_heard_again_is_not_missing_and_one_that_spans_no_request_runs_at_its_peers_rate_per_user():
    """A CI run killed a worker before its first report: it counted 0 unknown, as if the server had
    seen none of its requests."""
    workers = Workers()
    workers.heartbeat("peer_1", at=1.0, users=2)
    workers.reported("peer_1", report(40, span=2.0), at=4.0)  # 20 a second for 2 users: 10 a user
    workers.stopping = True
    workers.reported("peer_1", report(0, span=3.0), at=7.0)  # from the stop on its users start nothing
    workers.heartbeat("silent_9", at=2.0, users=3)  # running users within the look before
    workers.heartbeat("silent_9", at=6.5, users=0)  # Locust's count as it stops: the most stands
    workers.heartbeat("heard_5", at=3.0, users=1)
    workers.reported("heard_5", report(0, span=0.0), at=5.0)  # before its first request: no rate
    workers.heartbeat("heard_5", at=6.0, users=1)
    lost = {w["worker"]: w for w in workers.lose({"silent_9", "heard_5"}, counted=False, now=7.0)}
    assert lost["silent_9"]["last_heard"] is None and lost["silent_9"]["lost_at"] == 7.0
    assert lost["silent_9"]["unknown"] == 10 * 3 * (7.0 - 1.0)  # its users since a look before they were seen
    assert "peers' rate per user for its 3 users" in lost["silent_9"]["unknown_counted_as"]
    assert lost["heard_5"]["unknown"] == 10 * 1 * (7.0 - 5.0)  # from its report, later than its users' start


def test_with_no_peer_rate_each_of_its_users_counts_a_request_and_a_worker_never_running_users_counts_none():
    workers = Workers()
    workers.heartbeat("a_1", at=8.5, users=4)
    workers.heartbeat("b_2", at=8.5)
    lost = {w["worker"]: w for w in workers.lose({"a_1", "b_2"}, counted=False, now=9.0)}
    assert lost["a_1"]["unknown"] == 4 and "at least" in lost["a_1"]["unknown_counted_as"]
    assert lost["b_2"]["unknown"] == 0
    assert host_of("no-uuid") == "no-uuid"


def test_tickets_of_a_removed_worker_are_written_off_so_a_counted_run_can_end_without_them():
    workers = Workers()
    workers.granted("a_1", 12)
    workers.granted("b_2", 12)
    workers.reported("a_1", report(5), at=1.0)
    workers.reported("b_2", report(4), at=1.0)
    assert workers.written_off() == 0  # silent, not removed: still awaited
    workers.remove("a_1")
    workers.remove("never_heard")
    assert workers.written_off() == 7
    workers.reset()
    assert workers.written_off() == 0
