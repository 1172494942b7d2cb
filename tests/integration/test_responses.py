"""The Responses API against the server of known timing: TTFT at the first output-text delta, TPOT
over the deltas, the tokens from the completed event; a server without it is a clear failure."""

from __future__ import annotations

import json

import pytest

from tests.conftest import get, headless_run

pytestmark = pytest.mark.timing  # judged to the millisecond: run alone, not beside other tests


def test_a_responses_stream_is_timed_to_the_millisecond_and_counted_from_its_completed_event(fake_server, tmp_path):
    server = fake_server("--ttft", "0.08", "--itl", "0.01", "--tokens", "12")
    run = headless_run(server.url, tmp_path / "r.json", "-u", "4", "-r", "4", "--num-requests", "60",
                       "--endpoint", "responses", "--max-tokens", "12")
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    truth = server.stats()
    assert (data["completed"], data["failed"]) == (60, 0) and data["total_output_tokens"] == 60 * 12
    assert data["output_tokens_counted_by"] == {"usage": 60}
    assert data["median_ttft_ms"] - truth["median_ttft_ms"] == pytest.approx(0, abs=5)
    assert data["median_tpot_ms"] == pytest.approx(10, abs=1)
    sent = json.loads(get(server.url + "/stats/last-request"))["body"]
    assert sent["max_output_tokens"] == 12 and sent["input"][-1]["role"] == "user" and "messages" not in sent


def test_a_server_without_the_responses_api_ends_the_run_at_its_first_404_with_a_clear_message(fake_server,
                                                                                               tmp_path):
    server = fake_server("--tokens", "4", "--no-responses")
    run = headless_run(server.url, tmp_path / "r.json", "-u", "1", "-r", "1", "-t", "60s", "--endpoint", "responses")
    output = run.stdout + run.stderr
    assert run.returncode == 2 and "Traceback" not in output, output
    assert f"POST {server.url}/v1/responses answered 404 Not Found" in output and "check --endpoint" in output
    data = json.loads((tmp_path / "r.json").read_text())  # what was sent is counted and written
    assert data["completed"] == 0 and set(data["failures"]) == {"http_404"}
