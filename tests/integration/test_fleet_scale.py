"""A fleet's replica count changed as capacity --scaling, tune's replicas lever and --scale-at change it:
the embedded fleet through the real vllm-router's worker management, a fleet of one's own through the
user's command, then the router's own list (issue 49). Fake replicas: the router is what is tested."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loadwatch import processes
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_router
from loadwatch.fleet.options import Fleet
from loadwatch.fleet.routers import router
from loadwatch.fleet.scale import ScaleError, Scaler
from loadwatch.fleet.schedule import SCALING
from tests.conftest import free_port, wait_for


@pytest.fixture
def fleet(fake_server):
    """vllm-router (round_robin) in front of two fake replicas, a and b."""
    settings = EngineSettings()
    ensure_router(settings)
    replicas = {name: fake_server("--fingerprints", name, "--vllm-metrics").url for name in ("a", "b")}
    port, metrics = free_port(), free_port()
    command = router("vllm-router").command(settings.python, port, metrics, list(replicas.values()), "round_robin", [])
    started = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: processes.answers(url + "/health"), 60, "vllm-router")
        yield Fleet("vllm-router", url, replicas, f"http://127.0.0.1:{metrics}", "round_robin")
    finally:
        started.terminate()
        started.wait(10)


def test_the_embedded_fleet_is_scaled_through_its_router(fleet):
    scaler = Scaler(fleet)
    said: list[str] = []
    scaler.scale_to(1, said.append)
    assert scaler.serving() == [fleet.replicas["a"]] and scaler.names(1) == ["a"]
    scaler.scale_to(2, said.append)
    assert scaler.serving() == sorted(fleet.replicas.values())
    assert said == ["fleet: scaling to 1 replica", "fleet: scaling to 2 replicas"]
    with pytest.raises(ScaleError, match="the embedded fleet has 2 replicas: start it with --replicas 3"):
        scaler.scale_to(3, said.append)


def test_a_fleet_of_ones_own_is_scaled_by_its_command_and_awaited_on_the_routers_list(fleet, tmp_path):
    log = tmp_path / "scale.log"
    scaler = Scaler(fleet, scale_script(tmp_path, fleet), timeout=30, log=log)
    scaler.scale_to(1, lambda line: None)
    assert scaler.serving() == [fleet.replicas["a"]]
    scaler.scale_to(2, lambda line: None)
    assert len(scaler.serving()) == 2 and "scaled to 2" in log.read_text()

    refused = Scaler(fleet, "false {replicas}", timeout=30, log=log)
    with pytest.raises(ScaleError, match=r"--scale exited with 1: false 1 \(its output: "):
        refused.scale_to(1, lambda line: None)
    # A command that succeeds but changes nothing: the router's list says so once the time is up.
    idle = Scaler(fleet, "true {replicas}", timeout=3, log=log)
    with pytest.raises(ScaleError, match=r"the router lists 2 replicas after 3 s, not 1: http://127"):
        idle.scale_to(1, lambda line: None)


def scale_script(tmp_path, fleet) -> str:
    """The user's --scale command, as an orchestrator does it: it tells the router which replicas serve."""
    script = tmp_path / "scale.py"
    script.write_text(
        "import sys, urllib.request\n"
        f"router, urls = {fleet.url!r}, {list(fleet.replicas.values())!r}\n"
        "count = int(sys.argv[1])\n"
        "for i, url in enumerate(urls):\n"
        "    action = 'add_worker' if i < count else 'remove_worker'\n"
        "    try:\n"
        "        urllib.request.urlopen(urllib.request.Request(f'{router}/{action}?url={url}', method='POST'))\n"
        "    except Exception as exc:\n"
        "        print(action, url, exc)\n"
        "print('scaled to', count)\n")
    return f"{sys.executable} {script} {{replicas}}"


def test_a_run_whose_fleet_grows_midway_reports_each_change_and_its_replicas_serve_from_then_on(fleet, tmp_path):
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home"), "LOADWATCH_STACK_FREE_PORTS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "run", "--target", fleet.url, "--router", "vllm-router",
         "--scale", scale_script(tmp_path, fleet), "--scale-at", "0s=1", "--scale-at", "10s=2", "-u", "4",
         "-t", "25s", "--slo", "ttft_p99_ms=5000", "--out", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = next((tmp_path / "runs").iterdir())
    events = json.loads((run_dir / SCALING).read_text())["events"]
    assert [(e["at_s"], e["replicas"], e["error"]) for e in events] == [(0, 1, None), (10, 2, None)]
    changed = events[1]["asked"] + events[1]["ready_s"]
    records = [json.loads(line) for line in (run_dir / "results.requests.jsonl").read_text().splitlines()]
    before = {r["replica"] for r in records if r["start"] < events[1]["asked"]}
    after = {r["replica"] for r in records if r["start"] > changed + 1}
    assert before == {"a"} and after == {"a", "b"}, (before, after)
    report = (run_dir / "report.md").read_text()
    assert "## Replicas over time" in report and "| 10 | 2 |" in report, report
    assert json.loads((run_dir / "report.json").read_text())["scaling"]["events"][1]["slo_held_again_s"] == 0.0
