"""A refusing server is not hammered, and an endless line stalls neither the run nor its process."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import closed_port, finish, free_port, get, locust_command, wait_for


def headless(server_url: str, seconds: int, results, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(locust_command("-H", server_url, "--headless", "-u", "2", "-r", "2", "-t", f"{seconds}s",
                                         "--metrics-port", "0", "--results-json", str(results), *extra),
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("fault", "most"), [("http_429", 20), ("http_503", 20), ("http_400", 24)])
def test_a_closed_loop_does_not_spin_on_instant_refusals(fake_server, tmp_path, fault, most):
    # Before: 2 users sent 2,745 requests in 3.3 s to a 429 server.
    server = fake_server(f"--fault={fault}=1", "--retry-after", "0.5")
    results = tmp_path / "results.json"
    headless(server.url, 4, results)
    data = json.loads(results.read_text())
    sent = server.stats()["arrivals"]
    assert 2 <= sent <= most, f"{sent} requests in 4 s from 2 users"
    assert data["failures"] == {fault: data["failed"]} and data["failed"] >= sent - 2  # each counted once


def test_a_refused_connection_is_not_retried_in_a_hot_loop(tmp_path):
    results = tmp_path / "results.json"
    headless(f"http://127.0.0.1:{closed_port()}", 4, results, "--model", "m")
    data = json.loads(results.read_text())
    assert 2 <= data["failed"] <= 24 and set(data["failures"]) == {"connection"}


def test_an_endless_line_stalls_neither_the_run_nor_the_metrics(fake_server, tmp_path):
    # Before: one endless line froze the process; a 5 s run took 33 s and /metrics stalled as long.
    server = fake_server("--fault=endless_line=1", "--itl", "0.001")
    metrics_port = free_port()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    results = tmp_path / "results.json"
    locust = subprocess.Popen(
        locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "-t", "5s", "--stop-timeout", "5",
                       "--metrics-port", str(metrics_port), "--results-json", str(results)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Timed from its first answer: Locust's start takes what the machine gives it.
        wait_for(lambda: get(metrics, timeout=5), 60, "Locust's metrics to answer")
        began = time.monotonic()
        slowest = 0.0
        while locust.poll() is None and time.monotonic() - began < 5:
            asked = time.monotonic()
            get(metrics, timeout=5)
            slowest = max(slowest, time.monotonic() - asked)
            time.sleep(0.2)
    finally:
        output = finish(locust, exit_within=30)
    took = time.monotonic() - began
    data = json.loads(results.read_text())
    assert slowest < 1.0, f"/metrics took {slowest:.1f} s to answer during the run"
    assert took < 15, f"a 5 s run went on {took:.0f} s after it began answering"
    assert data["failed"] > 0 and set(data["failures"]) == {"malformed_chunk"}, output[-2000:]
