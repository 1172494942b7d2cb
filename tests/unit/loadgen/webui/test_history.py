"""The web UI's history: each point's client figures cover the last WINDOW seconds only, stages
are marked where they change, and the history stays bounded."""

from __future__ import annotations

import pytest

from loadwatch.loadgen.state import RunState
from loadwatch.loadgen.webui import history as h
from loadwatch.metrics.timing import RequestMetrics


def served(state: RunState, ttft: float, n: int, tokens: int = 10) -> None:
    series = state.recorder.samples.of(("m", "chat", "load"))
    for _ in range(n):
        series.add_success(0.0, RequestMetrics(ttft=ttft, e2e=ttft + 0.1, itl=(0.01,) * (tokens - 1), tpot=0.01,
                                               prompt_tokens=5, completion_tokens=tokens))


def test_a_point_shows_the_last_window_not_the_whole_run():
    state = RunState(["chat"], "http://x")
    history = h.History(state, lambda: 4)
    served(state, 0.05, 1000)
    history.sample(now=1000.0)
    served(state, 0.5, 100)  # the server slows down: the whole run's median would not show it
    state.recorder.samples.of(("m", "chat", "load")).add_failure(0.0, 0.1, "http_500")
    point = history.sample(now=1000.0 + h.WINDOW)
    assert point["ttft_p50"] == pytest.approx(500, rel=0.01)
    assert point["output_tps"] == pytest.approx(100 * 10 / h.WINDOW)
    assert point["failures"] == {"http_500": pytest.approx(1 / h.WINDOW)}
    assert point["users"] == 4 and point["engine"] is None


def test_stages_are_marked_where_they_change_and_the_history_is_bounded(monkeypatch):
    monkeypatch.setattr(h, "POINTS", 5)
    state = RunState(["chat"], "http://x")
    history = h.History(state, lambda: 0)
    for t in range(8):
        history.sample(now=float(t))
    state.start("http://x", 0, 0.0)
    history.sample(now=8.0)
    whole = history.as_dict()
    assert len(whole["points"]) == 5 and whole["points"][-1]["t"] == 8.0
    assert [s["name"] for s in whole["stages"]] == ["load"]


def test_a_point_says_how_late_sends_went_out_over_the_window():
    state = RunState(["chat"], "http://x")
    history = h.History(state, lambda: 1)
    assert history.sample(now=1000.0)["lag_ms"] is None  # a closed loop schedules nothing
    for lag in (0.001, 0.003):
        state.recorder.record_arrival(("m", "trace"), "load", 1000.0, 1000.0 + lag, warmup=False)
    assert history.sample(now=1001.0)["lag_ms"] == pytest.approx(2.0)
    state.recorder.record_arrival(("m", "trace"), "load", 1000.0, 1000.01, warmup=False)
    assert history.sample(now=1000.0 + h.WINDOW + 1)["lag_ms"] == pytest.approx(10.0)  # the window moved on


def test_a_poll_gets_the_points_after_its_last_one_only():
    state = RunState(["chat"], "http://x")
    history = h.History(state, lambda: 1)
    for t in range(10):
        history.sample(now=1000.0 + t)
    assert [p["t"] for p in history.as_dict(since=1006.0)["points"]] == [1007.0, 1008.0, 1009.0]
    assert history.as_dict(since=1009.0)["points"] == []
    assert len(history.as_dict()["points"]) == 10


def test_the_tab_lists_the_slowest_recent_requests_with_the_part_that_made_each_slow():
    from loadwatch.loadgen.recorder import LLMRequest
    from loadwatch.metrics.timing import EngineAccount

    state = RunState(["chat"], "http://x")
    history = h.History(state, lambda: 4)
    for i in range(30):
        queue = 0.8 if i == 7 else 0.001
        m = RequestMetrics(ttft=0.02 + queue, e2e=0.2 + queue, itl=(), tpot=0.01, prompt_tokens=5,
                           completion_tokens=10, headers=0.005,
                           engine=EngineAccount(queue=queue, prefill=0.01, decode=0.1, mean_itl=0.01))
        state.recorder.record(LLMRequest("m", "chat", 1000.0 + i, 0.2 + queue, m, request_id=f"r{i}"))
    history.sample(now=1100.0)
    slowest = history.as_dict()["slowest"]
    assert len(slowest) == h.SLOWEST and slowest[0]["id"] == "r7"
    assert slowest[0]["cause"] == "waiting in the engine's queue"
    assert slowest[0]["cause_ms"] == pytest.approx(800) and slowest[0]["median_ms"] == pytest.approx(1)


def test_a_worker_ships_only_its_slowest_recent_requests_and_the_master_keeps_them():
    from loadwatch.loadgen.recorder import SHIPPED_SLOW, LLMRequest

    worker, master = RunState(["chat"], "http://x"), RunState(["chat"], "http://x")
    for i in range(50):
        m = RequestMetrics(ttft=0.01 * (i + 1), e2e=1.0, itl=(), tpot=0.01, prompt_tokens=5, completion_tokens=10)
        worker.recorder.record(LLMRequest("m", "chat", 1000.0 + i, 1.0, m, request_id=f"w{i}"))
    report = worker.recorder.report()
    assert [r["id"] for r in report["slow"]] == [f"w{i}" for i in range(49, 49 - SHIPPED_SLOW, -1)]
    assert not worker.recorder.recent
    master.recorder.merge(report)
    assert len(master.recorder.recent) == SHIPPED_SLOW


def test_a_point_shows_the_refusals_a_second_apart_from_failures():
    state = RunState(["chat"], "http://x")
    history = h.History(state, lambda: 4)
    history.sample(now=1000.0)
    series = state.recorder.samples.of(("m", "chat", "load"))
    for _ in range(5):
        series.add_rejected(0.0, 0.01, "max_num_queued_reqs")
    point = history.sample(now=1000.0 + h.WINDOW)
    assert point["rejected_per_s"] == pytest.approx(5 / h.WINDOW) and point["failures"] == {}
