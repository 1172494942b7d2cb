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
