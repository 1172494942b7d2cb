"""A load generator that cannot keep up says so: in its log, its results and its metrics."""

import json
import subprocess
import sys

from tests.conftest import REPO


def busy_run(fake_server, tmp_path, locustfile: str, *options: str) -> tuple[dict, str]:
    """A run of a locustfile whose greenlet holds the event loop (busy.py, swamped.py): its results
    and its output."""
    server = fake_server("--ttft", "0.02", "--itl", "0.005", "--tokens", "5")
    results = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "tests" / "integration" / "locustfiles" / locustfile),
         "-H", server.url, "--headless", "-u", "4", "-r", "4", "--metrics-port", "0", "--results-json",
         str(results), *options],
        capture_output=True, text=True, timeout=90)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    return json.loads(results.read_text()), output


def test_a_saturated_load_generator_says_so_in_its_log_results_and_metrics(fake_server, tmp_path):
    data, output = busy_run(fake_server, tmp_path, "busy.py", "-t", "13s")
    assert "ran late" in data["saturated"]["local"]
    assert output.count("The load generator is a bottleneck: Locust process local is saturated") == 1
    assert "Load generator saturated" in output and "add --processes" in output


def test_an_open_loop_the_load_generator_cannot_keep_is_marked_short_of_its_schedule(fake_server, tmp_path):
    """1,000 arrivals a second cannot go out in the 10 ms a second the loop is free: 10 µs each."""
    data, output = busy_run(fake_server, tmp_path, "swamped.py", "-t", "8s", "--request-rate", "1000")
    arrivals = data["arrivals"]
    assert arrivals["fell_short"] and arrivals["achieved_rate"] < 0.95 * arrivals["scheduled_rate"], arrivals
    assert "the load generator, not the server, was the limit" in output
