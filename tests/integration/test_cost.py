"""Cost per token (issue 41): --price-per-hour, of the server or (with --gpus) of one GPU, puts $ per
1M output and total tokens in the results, the summary, report.md and report.html."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import headless_run


def test_a_priced_run_says_what_a_million_tokens_cost_at_its_throughput(fake_server, tmp_path):
    server = fake_server("--ttft", "0.02", "--itl", "0.005", "--tokens", "8")
    run = headless_run(server.url, tmp_path / "results.json", "-u", "4", "-r", "4", "--num-requests", "80",
                       "--price-per-hour", "2.5", "--gpus", "2")
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["price_per_hour"] == 5.0
    expected = 5.0 / 3600 / results["output_throughput"] * 1e6
    assert results["cost_per_million_output_tokens"] == pytest.approx(expected)
    assert results["cost_per_million_total_tokens"] == pytest.approx(
        5.0 / 3600 / results["total_token_throughput"] * 1e6)
    assert "Cost per 1M output tokens ($, at $5/h):" in run.stdout
    report = subprocess.run([sys.executable, "-m", "loadwatch.cli", "report", str(tmp_path / "results.json")],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    assert f"At $5 an hour: ${expected:.2f} per 1M output tokens" in (tmp_path / "report.md").read_text()
    assert "$ per 1M output tokens" in (tmp_path / "report.html").read_text()


def test_an_unpriced_run_says_nothing_of_cost(fake_server, tmp_path):
    server = fake_server("--ttft", "0.01", "--itl", "0.002", "--tokens", "4")
    run = headless_run(server.url, tmp_path / "results.json", "-u", "2", "-r", "2", "--num-requests", "10")
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["cost_per_million_output_tokens"] is None and "Cost per 1M" not in run.stdout
