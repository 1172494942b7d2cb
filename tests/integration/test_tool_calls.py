"""A stream that only calls a tool (what an agent's model mostly sends) is output, not an empty
completion: a success, its TTFT at the first argument, not at the chunk naming the function."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import locust_command

pytestmark = pytest.mark.integration


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
