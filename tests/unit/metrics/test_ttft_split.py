"""Each request's TTFT split by the engine's own account: exact parts, over the joined requests."""

import json

import pytest

from loadwatch.cli import main
from loadwatch.metrics.records import as_record
from loadwatch.metrics.timing import EngineAccount, RequestMetrics
from loadwatch.metrics.ttft_split import ttft_split
from tests.conftest import free_port
from tests.unit.report.test_report import RESULTS


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


def test_the_report_says_request_by_request_where_the_time_went(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({**RESULTS, "records": "results.requests.jsonl"}))
    (tmp_path / "results.requests.jsonl").write_text(
        "".join(json.dumps(record(i, 0.010)) + "\n" for i in range(20)))
    assert main(["report", str(tmp_path), "--prometheus", f"http://127.0.0.1:{free_port()}"]) == 0
    text = (tmp_path / "report.md").read_text()
    assert "## Request by request" in text and "20 of the 20 measured requests" in text
    assert "| engine: scheduled to first token (prefill) | 10.0 ms | 10.0 ms | 10.0 ms |" in text
