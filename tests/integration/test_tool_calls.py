"""A stream that only calls a tool (what an agent's model mostly sends) is output, not an empty
completion: a success, its TTFT at the first argument, not at the chunk naming the function."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from loadwatch.metrics.records import read_records
from tests.conftest import REPO, get, locust_command

pytestmark = pytest.mark.timing  # judged to the millisecond: run alone, not beside other tests


def test_a_tool_only_stream_is_a_success_timed_at_its_first_argument(fake_server, tmp_path):
    server = fake_server("--tool-calls", "--ttft", "0.2", "--itl", "0.01", "--tokens", "8")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "--num-requests", "10",
                       "--metrics-port", "0", "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["completed"] == 10 and results["failed"] == 0, results["failures"]
    true_median = server.stats()["median_ttft_ms"]
    assert true_median >= 200
    assert results["median_ttft_ms"] == pytest.approx(true_median, abs=5)
    assert results["total_output_tokens"] == 10 * 8


def test_a_session_answers_each_tool_call_with_a_result_and_counts_turns(fake_server, tmp_path):
    server = fake_server("--tool-calls", "--ttft", "0.01", "--itl", "0.001", "--tokens", "4")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "--num-requests", "12",
                       "--metrics-port", "0", "--dataset", "sessions", "--turns", "3", "--system-len", "20",
                       "--turn-len", "8", "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["completed"] == 12 and results["total_tool_calls"] == 12
    body = json.loads(get(server.url + "/stats/last-request"))["body"]
    assert [t["function"]["name"] for t in body["tools"]] == ["query_metrics", "read_log"]
    roles = [m["role"] for m in body["messages"]]
    assert roles[:2] == ["system", "user"] and roles[2:] in (["assistant", "tool"], ["assistant", "tool"] * 2)
    # The history carries the model's own call, and the result answers it by its id.
    call = body["messages"][2]["tool_calls"][0]["function"]
    assert call == {"name": "get_weather", "arguments": "tok0 tok1 tok2 tok3 "}
    assert body["messages"][3]["tool_call_id"] == "call_0"
    turns = Counter(r["turn"] for r in read_records(tmp_path / "r.requests.jsonl"))
    assert turns == {1: 4, 2: 4, 3: 4}  # two users, two three-turn sessions each


def test_the_agent_locustfile_runs_sessions_unless_told_otherwise(fake_server, tmp_path):
    server = fake_server("--ttft", "0.01", "--itl", "0.001", "--tokens", "4")
    def agent(*args: str) -> list[str]:
        return [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "agent.py"), *args]

    for extra, turns in (((), {1, 2, 3}), (("--dataset", "random", "--input-len", "8"), {None})):
        run = subprocess.run(
            agent("-H", server.url, "--headless", "-u", "1", "-r", "1", "--num-requests", "3",
                           "--metrics-port", "0", "--results-json", str(tmp_path / "r.json"), *extra),
            capture_output=True, text=True, timeout=60,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        records = list(read_records(tmp_path / "r.requests.jsonl"))
        assert {r["scenario"] for r in records} == {"agent"} and {r["turn"] for r in records} == turns
    refused = subprocess.run(
        agent("-H", server.url, "--headless", "-u", "1", "-r", "1", "-t", "5s",
                       "--metrics-port", "0", "--request-rate", "2"),
        capture_output=True, text=True, timeout=60,
    )
    assert refused.returncode == 2 and "sessions are closed loops" in refused.stderr, refused.stderr[-2000:]
