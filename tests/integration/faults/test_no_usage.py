"""A server that ignores stream_options.include_usage: requests still count their output tokens,
and the run says how, instead of reporting 0 tokens and 0 tok/s."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import locust_command


def test_output_tokens_without_usage_are_counted_and_said_to_be(fake_server, tmp_path):
    server = fake_server("--fault=no_usage=1", "--tokens", "8")
    results = tmp_path / "results.json"
    run = subprocess.run(locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "--num-requests", "20",
                                        "--metrics-port", "0", "--results-json", str(results)),
                         capture_output=True, text=True, timeout=120)
    data = json.loads(results.read_text())
    assert data["completed"] == 20 and data["output_tokens_counted_by"] == {"approximation": 20}
    # "tok0 " ... "tok7 ": 40 characters, 10 tokens at 4 characters each.
    assert data["total_output_tokens"] == 200 and data["output_throughput"] > 0
    assert run.stderr.count("sent no usage") == 1, run.stderr[-2000:]
    assert "counted by approximation:" in run.stdout


def test_a_server_with_usage_is_counted_by_it(fake_server, tmp_path):
    server = fake_server("--tokens", "8")
    results = tmp_path / "results.json"
    subprocess.run(locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "--num-requests", "10",
                                  "--metrics-port", "0", "--results-json", str(results)),
                   capture_output=True, text=True, timeout=120)
    data = json.loads(results.read_text())
    assert data["output_tokens_counted_by"] == {"usage": 10} and data["total_output_tokens"] == 80


def test_streams_without_done_after_their_finish_reason_succeed_and_are_counted(fake_server, tmp_path):
    server = fake_server("--fault=no_done=2", "--tokens", "8")
    results = tmp_path / "results.json"
    run = subprocess.run(locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "--num-requests", "20",
                                        "--metrics-port", "0", "--results-json", str(results)),
                         capture_output=True, text=True, timeout=120)
    data = json.loads(results.read_text())
    assert data["completed"] == 20 and data["failed"] == 0 and data["streams_without_done"] == 10, run.stdout
    assert "Streams ended without [DONE]:" in run.stdout
