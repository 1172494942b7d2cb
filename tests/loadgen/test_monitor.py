import json
import subprocess
import sys

import pytest

from loadwatch.loadgen.monitor import CPU_LIMIT, LAG_LIMIT, LATE_ARRIVALS, verdict
from tests.conftest import REPO


def test_a_process_is_saturated_by_a_late_loop_a_spent_core_or_late_arrivals():
    assert verdict([0.001] * 50, 0.3, 0) is None
    assert verdict([0.001] * 45 + [LAG_LIMIT * 2] * 5, 0.3, 0) is None  # a pause or two is not saturation
    assert verdict([0.001] * 30 + [0.04] * 20, 0.8, 0) == "its event loop ran late (40 ms at worst)"
    assert "other processes on the machine took the CPU" in verdict([0.001] * 30 + [0.04] * 20, 0.1, 0)
    assert "95% of a CPU core" in verdict([0.001] * 50, max(CPU_LIMIT + 0.01, 0.95), 0)
    assert "open-loop arrivals" in verdict([0.001] * 50, 0.3, LATE_ARRIVALS)


@pytest.mark.integration
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
