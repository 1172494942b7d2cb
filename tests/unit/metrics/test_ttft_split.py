"""Each request's TTFT split by the engine's own account: exact parts, over the joined requests."""

import pytest

from loadwatch.metrics.records import as_record
from loadwatch.metrics.timing import EngineAccount, RequestMetrics
from loadwatch.metrics.ttft_split import cause, measured, medians, ttft_split


def record(i: int, prefill: float | None) -> dict:
    engine = None if prefill is None else EngineAccount(queue=0.001, prefill=prefill, decode=0.05, mean_itl=0.01)
    m = RequestMetrics(ttft=0.010 + (prefill or 0) + 0.004, e2e=0.2, itl=(), tpot=0.01, prompt_tokens=10,
                       completion_tokens=5, headers=0.010, engine=engine)
    return as_record(f"r{i}", 1795000000.0 + i, "local", "tiny", "chat", "s", 0.2, None, m, "usage", False)


def test_the_parts_are_exact_over_the_joined_requests_and_the_rest_is_what_the_engine_does_not_hold():
    # 99 requests of 10 ms prefill and one of 2 s: the p99 prefill is the 99th of 100, not a bucket's guess.
    records = [record(i, 0.010) for i in range(99)] + [record(99, 2.0), record(100, None)]
    split = ttft_split(records)
    assert (split["joined"], split["measured"]) == (100, 101)
    parts = {p["part"]: p for p in split["parts"]}
    assert parts["engine_prefill_s"]["median_ms"] == pytest.approx(10)
    assert parts["engine_prefill_s"]["p99_ms"] == pytest.approx(10 + 0.01 * 1990)  # numpy's linear p99
    assert parts["ttft_rest_s"]["mean_ms"] == pytest.approx(3)  # 4 ms after the prefill, 1 ms of it queued
    assert ttft_split([record(0, None)]) is None


def queued(i: int, queue: float) -> dict:
    engine = EngineAccount(queue=queue, prefill=0.010, decode=0.05, mean_itl=0.01)
    m = RequestMetrics(ttft=0.010 + queue + 0.010 + 0.004, e2e=0.3 + queue, itl=(), tpot=0.01, prompt_tokens=10,
                       completion_tokens=5, headers=0.010, engine=engine)
    return as_record(f"q{i}", 1795000000.0 + i, "local", "tiny", "chat", "s", 0.3, None, m, "usage", False)


def test_the_slowest_band_names_the_part_that_dominates_it_and_the_median_band_its_own():
    # 99 requests queued 1 ms and one queued 2 s: the p99 band is that one, 98 % of it queued.
    records = [queued(i, 0.001) for i in range(99)] + [queued(99, 2.0)]
    bands = {b["band"]: b for b in ttft_split(records)["bands"]}
    assert bands["p99"]["requests"] == 1 and bands["p99"]["dominant"] == "engine_queue_s"
    assert bands["p99"]["dominant_share"] == pytest.approx(2.0 / 2.024)
    assert bands["median"]["requests"] == 99 and bands["median"]["dominant"] in ("headers_s", "engine_prefill_s")
    assert bands["p99"]["windows"] == [(1795000099.0, 1795000099.0 + 2.3)]


def test_the_cause_of_a_slow_request_is_its_part_furthest_above_the_median():
    records = [queued(i, 0.001) for i in range(9)] + [queued(9, 0.5)]
    typical = medians(measured(records))
    assert cause(records[9], typical) == ("engine_queue_s", pytest.approx(0.5), pytest.approx(0.001))
    client_only = {**records[9], "ttft_rest_s": None, "ttft_s": 0.9}
    assert cause(client_only, typical, ttft_only=True)[0] == "after_headers_s"
