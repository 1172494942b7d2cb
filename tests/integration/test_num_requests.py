"""--num-requests and --warmup-requests are exact across two worker processes."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import (
    finish,
    free_port,
    get,
    locust_command,
    scrape,
    total,
    wait_for,
)


def test_exactly_n_measured_requests_and_warmup_in_no_histogram(fake_server, tmp_path):
    server = fake_server("--ttft", "0.02", "--itl", "0.005", "--tokens", "5")
    web_port, metrics_port = free_port(), free_port()
    results = tmp_path / "results.json"
    locust = subprocess.Popen(
        locust_command("-H", server.url, "--autostart", "-u", "6", "-r", "6",
                       "--processes", "2", "--web-host", "127.0.0.1", "--web-port", str(web_port),
                       "--metrics-port", str(metrics_port), "--num-requests", "60", "--warmup-requests", "10",
                       "--results-json", str(results)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        wait_for(lambda: json.loads(get(f"http://127.0.0.1:{web_port}/stats/requests"))["state"] == "stopped",
                 60, "the run to stop by itself after 60 requests")
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        # The master's test_stop (stage `stopped`) follows its `stopped` state by up to a second.
        wait_for(lambda: total(scrape(metrics_url), "loadwatch_run_info", stage="stopped") == 1, 5, "test_stop")
        samples = scrape(metrics_url)
    finally:
        # A run ended by --num-requests leaves the web UI up, as a stopped test does; SIGTERM ends it.
        output = finish(locust)
    assert server.stats()["arrivals"] == 70, output
    assert total(samples, "loadwatch_client_requests_total") == 60
    assert total(samples, "loadwatch_client_time_to_first_token_seconds_count") == 60
    assert total(samples, "loadwatch_run_info", stage="stopped") == 1
    data = json.loads(results.read_text())
    assert data["completed"] + data["failed"] == 60
    assert data["warmup_requests"] == 10
