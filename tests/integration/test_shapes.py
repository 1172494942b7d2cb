"""Load shapes: stages follow the schedule, show on run_info, and get their own figures."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest

from tests.conftest import finish, free_port, locust_command, scrape

pytestmark = pytest.mark.timing  # judged to the millisecond: run alone, not beside other tests


def watch_stages(port: int, process: subprocess.Popen) -> list[str]:
    """The stage label of loadwatch_run_info, each time it changes, until the run ends."""
    seen: list[str] = []

    def poll() -> None:
        while process.poll() is None:
            try:
                samples = scrape(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                pass
            else:
                stages = [dict(ls)["stage"] for (name, ls) in samples if name == "loadwatch_run_info"]
                if stages and (not seen or seen[-1] != stages[0]):
                    seen.append(stages[0])
            threading.Event().wait(0.2)

    threading.Thread(target=poll, daemon=True).start()
    return seen  # filled in as the run goes


def test_step_shape_adds_users_stage_by_stage(fake_server, tmp_path):
    # ~100 ms per request: each closed-loop user sends about 10 requests a second.
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "5")
    port = free_port()
    process = subprocess.Popen(
        locust_command("-H", server.url, "--headless", "-u", "4", "--metrics-port", str(port),
                       "--shape", "step", "--step-size", "2", "--stage-duration", "4",
                       "--warmup-seconds", "1", "--results-json", str(tmp_path / "r.json")),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    seen = watch_stages(port, process)
    output = finish_when_done(process)
    assert process.returncode == 0, output
    assert [s for s in seen if s not in ("idle", "stopping", "stopped")] == ["warmup", "step-1", "step-2"], seen
    result = json.loads((tmp_path / "r.json").read_text())
    first, second = result["stages"]
    assert (first["name"], first["level"], first["unit"]) == ("step-1", 2, "users")
    assert (second["name"], second["level"]) == ("step-2", 4)
    assert first["duration"] == pytest.approx(4, abs=1.1)
    assert second["request_throughput"] / first["request_throughput"] == pytest.approx(2, rel=0.25)
    assert first["completed"] + second["completed"] == result["completed"]
    assert "step-2" in output  # the stage table under the summary


def test_step_shape_stages_the_requests_of_every_worker(fake_server, tmp_path):
    """A worker tells each request's stage from the schedule's start, which the master sends it on its
    own clock: without it, every worker's request fell in the first stage."""
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "5")
    process = subprocess.Popen(
        locust_command("-H", server.url, "--headless", "-u", "4", "--processes", "2", "--metrics-port", "0",
                       "--shape", "step", "--step-size", "2", "--stage-duration", "4", "--stop-timeout", "2",
                       "--results-json", str(tmp_path / "r.json")),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output = finish_when_done(process)
    assert process.returncode == 0, output
    result = json.loads((tmp_path / "r.json").read_text())
    first, second = result["stages"]
    assert second["request_throughput"] / first["request_throughput"] == pytest.approx(2, rel=0.3), (first, second)
    assert first["completed"] + second["completed"] == result["completed"]


def test_rate_sweep_reaches_every_worker(fake_server, tmp_path):
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "5")
    process = subprocess.Popen(
        locust_command("-H", server.url, "--headless", "-u", "2", "--processes", "2", "--metrics-port", "0",
                       "--request-rate", "10", "--shape", "sweep", "--sweep", "10,40", "--stage-duration", "4",
                       "--results-json", str(tmp_path / "r.json")),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output = finish_when_done(process)
    assert process.returncode == 0, output
    low, high = json.loads((tmp_path / "r.json").read_text())["stages"]
    assert (low["level"], high["level"], high["unit"]) == (10, 40, "requests/s")
    # Poisson counts over 4 s: 40 +- 13 and 160 +- 25 at three sigma.
    assert 27 <= low["completed"] <= 53, low["completed"]
    assert 135 <= high["completed"] <= 185, high["completed"]


def test_impossible_shape_stops_before_any_request(fake_server):
    server = fake_server()
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "4", "--metrics-port", "0",
                       "--shape", "spike", "--spike-base", "8"),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 2
    assert "--spike-base must be above 0 and below the spike's level 4" in run.stderr
    assert "Traceback" not in run.stderr
    assert server.stats()["arrivals"] == 0


def finish_when_done(process: subprocess.Popen) -> str:
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    return finish(process)
