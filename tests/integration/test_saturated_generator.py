"""A load generator that cannot keep up says so: in its log, its results and its metrics."""

import json
import subprocess
import sys

from tests.conftest import REPO


def test_a_saturated_load_generator_says_so_in_its_log_results_and_metrics(fake_server, tmp_path):
    server = fake_server("--ttft", "0.02", "--itl", "0.005", "--tokens", "5")
    results = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "tests" / "integration" / "locustfiles" / "busy.py"),
         "-H", server.url, "--headless", "-u", "4", "-r", "4", "-t", "13s", "--metrics-port", "0",
         "--results-json", str(results)],
        capture_output=True, text=True, timeout=90)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    data = json.loads(results.read_text())
    assert "ran late" in data["saturated"]["local"]
    assert output.count("The load generator is a bottleneck: Locust process local is saturated") == 1
    assert "Load generator saturated" in output and "add --processes" in output


def test_an_open_loop_the_load_generator_cannot_keep_is_marked_short_of_its_schedule(fake_server, tmp_path):
    """The hog holds the event loop 60 ms in every 70: 400 arrivals a second cannot all go out on time."""
    server = fake_server("--ttft", "0.02", "--itl", "0.005", "--tokens", "5")
    results = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "tests" / "integration" / "locustfiles" / "busy.py"),
         "-H", server.url, "--headless", "-u", "4", "-r", "4", "-t", "8s", "--metrics-port", "0",
         "--request-rate", "400", "--results-json", str(results)],
        capture_output=True, text=True, timeout=90)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    arrivals = json.loads(results.read_text())["arrivals"]
    assert arrivals["fell_short"] and arrivals["achieved_rate"] < 0.95 * arrivals["scheduled_rate"], arrivals
    assert "the load generator, not the server, was the limit" in output
