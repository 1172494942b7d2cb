"""Interrupting `loadwatch run` loses nothing and orphans nothing: Locust writes its results, every
part of the stack is stopped, and the exit code is 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import REPO, wait_for

pytestmark = pytest.mark.needs("prometheus")


def in_a_terminal() -> None:
    """SIGINT as a terminal's foreground job has it, whoever runs the tests: a suite started in the
    background of a script (CI's) hands it down ignored, and Ctrl-C would then reach no one."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["SIGTERM to loadwatch", "Ctrl-C to the terminal's process group"])
def test_an_interrupted_run_keeps_its_results_and_stops_everything(fake_server, tmp_path, how):
    server = fake_server("--tokens", "4")
    home = tmp_path / "home"
    run = subprocess.Popen(
        [sys.executable, "-m", "loadwatch.cli", "run", "--target", server.url, "-u", "2", "-t", "60s",
         "--metrics-port", "0", "--out", str(tmp_path / "runs")],
        env={**os.environ, "LOADWATCH_STACK_HOME": str(home)}, cwd=tmp_path, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=in_a_terminal)
    try:
        wait_for(lambda: server.stats()["arrivals"] >= 10, 60, "the load test to be under way")
        started = json.loads(next((tmp_path / "runs").glob("*/stack.json")).read_text())
        pids = [c["pid"] for c in started["components"]]
        locust = [p for p in psutil.Process(run.pid).children() if "locust" in " ".join(p.cmdline())]
        if how.startswith("SIGTERM"):
            run.send_signal(signal.SIGTERM)
        else:
            os.killpg(run.pid, signal.SIGINT)
        output, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 130, output[-3000:]
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    assert results["completed"] > 0 and results["completed"] + results["failed"] <= server.stats()["arrivals"]
    time.sleep(0.5)
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert locust and not any(p.is_running() and p.status() != "zombie" for p in locust)
    assert not list((home / "stacks").glob("*.json")), "no stack is noted as running"
    assert "stack stopped" in output and "Traceback" not in output


def test_ctrl_c_to_a_busy_locust_stops_it_gracefully_without_a_traceback(fake_server, tmp_path):
    """Python raises KeyboardInterrupt in whichever greenlet runs when SIGINT comes; busy.py's hog
    holds the loop 60 ms in every 70, so unhandled, most of these three would land there and print
    gevent's traceback (a CI run's interrupt test failed on a busy machine so). Each run is stopped
    as Ctrl-C stops it: its users finish, its results are written, its exit code is Locust's."""
    server = fake_server("--tokens", "4")
    busy = REPO / "tests" / "integration" / "locustfiles" / "busy.py"
    for attempt in range(3):
        results = tmp_path / f"results-{attempt}.json"
        under_way = server.stats()["arrivals"] + 4
        locust = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(busy), "-H", server.url, "--headless", "-u", "2", "-t", "60s",
             "--metrics-port", "0", "--results-json", str(results)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=in_a_terminal)
        try:
            wait_for(lambda n=under_way: server.stats()["arrivals"] >= n, 60, "the load test to be under way")
            locust.send_signal(signal.SIGINT)
            output, _ = locust.communicate(timeout=60)
        finally:
            if locust.poll() is None:
                locust.kill()
        assert "Traceback" not in output, output
        assert locust.returncode == 0, output
        assert json.loads(results.read_text())["completed"] > 0
