"""Clients that hang up: a share of requests closes its stream after some tokens or seconds, and is
counted as cancelled, neither success nor failure, with its TTFT where it got that far."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import headless_run


def run(server, tmp_path, *options: str) -> dict:
    results = tmp_path / "r.json"
    done = headless_run(server.url, results, "-u", "4", "-r", "4", "--num-requests", "40", *options)
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Cancelled requests (hung up):" in done.stdout
    return json.loads(results.read_text())


def test_a_share_hung_up_after_some_tokens_is_cancelled_with_its_ttft(fake_server, tmp_path):
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "20")
    data = run(server, tmp_path, "--cancel-ratio", "0.5", "--cancel-after-tokens", "3")
    assert data["failed"] == 0 and data["completed"] + data["cancelled"] == 40
    assert 5 <= data["cancelled"] <= 35  # half of 40, give or take chance
    # The server saw the hang-ups: it finished only the others.
    assert server.stats()["outcomes"]["completed"] == data["completed"]
    records = [json.loads(line) for line in (tmp_path / "r.requests.jsonl").read_text().splitlines()]
    cancelled = [r for r in records if r["failure"] == "cancelled"]
    assert len(cancelled) == data["cancelled"] and all(r["ttft_s"] > 0.04 for r in cancelled)
    assert all(r["elapsed_s"] < 0.05 + 19 * 0.01 for r in cancelled)  # gone before the end of the answer
    # Read back exactly, the cancelled stay cancelled.
    report = subprocess.run([sys.executable, "-m", "loadwatch.cli", "report", str(tmp_path / "r.json")],
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0 and "Traceback" not in report.stdout + report.stderr, report.stderr


def test_a_hang_up_before_the_first_token_has_no_ttft(fake_server, tmp_path):
    server = fake_server("--ttft", "0.3", "--itl", "0.01", "--tokens", "5")
    data = run(server, tmp_path, "--cancel-ratio", "1", "--cancel-after", "0.1")
    assert (data["cancelled"], data["completed"], data["failed"]) == (40, 0, 0)
    assert data["median_ttft_ms"] is None
