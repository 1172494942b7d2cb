"""A fleet's replica count changed as capacity --scaling, tune's replicas lever and --scale-at change it:
the embedded fleet through the real vllm-router's worker management, a fleet of one's own through the
user's command, then the router's own list (issue 49). Fake replicas: the router is what is tested."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from loadwatch import processes
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_package
from loadwatch.fleet.routers import router
from loadwatch.fleet.scale import ScaleError, Scaler
from loadwatch.fleet.schedule import SCALING
from loadwatch.fleet.servers import HERE, FrontRouter, Servers
from tests.conftest import free_port, wait_for


@contextlib.contextmanager
def behind_router(fake_server, *flags: str, names: tuple[str, ...] = ("a", "b"), policy: str = "round_robin"):
    """vllm-router (round_robin, or `policy`) in front of two fake replicas, a and b (or `names`), each
    started with `flags` and answering with its name."""
    settings = EngineSettings()
    ensure_package(settings, router("vllm-router").requirement)
    replicas = {name: fake_server("--fingerprints", name, "--vllm-metrics", *flags).url for name in names}
    port, metrics = free_port(), free_port()
    command = router("vllm-router").command(settings.python, port, metrics, list(replicas.values()), policy, [])
    started = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: processes.answers(url + "/health"), 60, "vllm-router")
        yield Servers(owner=HERE, url=url, replicas=replicas,
                      router=FrontRouter(program="vllm-router", metrics=f"http://127.0.0.1:{metrics}", policy=policy))
    finally:
        started.terminate()
        started.wait(10)


@pytest.fixture
def fleet(fake_server):
    with behind_router(fake_server) as started:
        yield started


def test_the_embedded_fleet_is_scaled_through_its_router(fleet):
    scaler = Scaler(fleet)
    said: list[str] = []
    scaler.scale_to(1, said.append)
    assert scaler.serving() == [fleet.replicas["a"]] and scaler.serving_names() == ["a"]
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
        # --scale alone: the target is a router, its replicas the ones it lists
        [sys.executable, "-m", "loadwatch.cli", "run", "--target", fleet.url,
         "--scale", scale_script(tmp_path, fleet), "--scale-at", "0s=1", "--scale-at", "8s=2", "-u", "4",
         "-t", "18s", "--slo", "ttft_p99_ms=5000", "--out", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = next((tmp_path / "runs").iterdir())
    events = json.loads((run_dir / SCALING).read_text())["events"]
    assert [(e["at_s"], e["replicas"], e["error"]) for e in events] == [(0, 1, None), (8, 2, None)]
    changed = events[1]["asked"] + events[1]["ready_s"]
    records = [json.loads(line) for line in (run_dir / "results.requests.jsonl").read_text().splitlines()]
    before = {r["replica"] for r in records if r["start"] < events[1]["asked"]}
    after = {r["replica"] for r in records if r["start"] > changed + 1}
    assert before == {"a"} and after == {"a", "b"}, (before, after)
    report = (run_dir / "report.md").read_text()
    assert "## Replicas over time" in report and "| 8 | 2 |" in report, report
    assert json.loads((run_dir / "report.json").read_text())["scaling"]["events"][1]["slo_held_again_s"] == 0.0


@pytest.fixture
def slotted_fleet(fake_server):
    """Two fake replicas of 2 slots each (requests of 0.14 s): one sustains 14 requests/s, two twice that."""
    with behind_router(fake_server, "--max-concurrency", "2", "--ttft", "0.05", "--itl", "0.01", "--tokens",
                       "10") as started:
        yield started


@pytest.mark.needs("prometheus")
def test_capacity_with_scaling_measures_one_replica_then_the_fleet_and_writes_the_autoscaling_rule(slotted_fleet,
                                                                                                   tmp_path):
    fleet = slotted_fleet
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home"), "LOADWATCH_STACK_FREE_PORTS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--target", fleet.url, "--router", "vllm-router",
         "--scale", scale_script(tmp_path, fleet), "--scaling", "--slo", "ttft_p90_ms=250", "--mode", "users",
         "--level-duration", "4s", "--warmup", "1s", "--cool-down", "1s", "--max-duration", "90s",
         "--out", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=400, env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    run_dir = next((tmp_path / "runs").iterdir())
    result = json.loads((run_dir / "capacity.json").read_text())
    one = json.loads((run_dir / "replicas-1" / "capacity.json").read_text())
    scaling = result["scaling"]
    assert scaling["capacity"] == {"1": one["max_sustainable"], "2": result["max_sustainable"]}
    assert result["max_sustainable"] > one["max_sustainable"], output
    assert 0 < scaling["efficiency"] <= 1.25
    # One replica's levels went to one replica alone; the fleet's to both.
    first = [json.loads(line)["replica"] for line in
             (run_dir / "replicas-1" / "levels" / "level-01.requests.jsonl").read_text().splitlines()]
    assert set(first) == {"a"}
    found = result["autoscaling"]
    assert found["metric"] == "requests_in_engine" and found["threshold"] > 0, found
    assert {p.name for p in (run_dir / "autoscaling").iterdir()} == {
        "keda-scaledobject.yaml", "hpa.yaml", "prometheus-adapter-rules.yaml"}
    report = (run_dir / "report.md").read_text()
    assert "### Capacity against replicas" in report and "### Autoscaling" in report
    assert "scaled to 1" in (run_dir / "scale.log").read_text() and "Traceback" not in output


@pytest.mark.needs("prometheus")
def test_a_run_takes_replicas_by_a_pattern_each_named_by_its_pod_and_read_anew_once_scaled(fake_server, tmp_path):
    """`--replica 'vllm-*'` on loadwatch's own commands, as on Kubernetes (docs/guides/fleet.md): the
    replicas the router lists, each named by the pod it answers as (its requests, its sidecar target and
    its report row alike), and read anew after each --scale (a pod scaled in and out has a new address)."""
    pods = ("vllm-5d8f7-abcde", "vllm-5d8f7-fghij")
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home"), "LOADWATCH_STACK_FREE_PORTS": "1"}
    with behind_router(fake_server, names=pods) as fleet:
        done = subprocess.run(
            [sys.executable, "-m", "loadwatch.cli", "run", "--target", fleet.url, "--replica", "vllm-*",
             "--scale", scale_script(tmp_path, fleet), "--scale-at", "0s=1", "--scale-at", "6s=2",
             "-u", "2", "-t", "14s", "--out", str(tmp_path / "runs")],
            capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"fleet: reading the replicas the router lists now: {pods[0]}\n" in done.stdout, done.stdout
    assert f"fleet: reading the replicas the router lists now: {', '.join(pods)}\n" in done.stdout, done.stdout
    run_dir = next((tmp_path / "runs").iterdir())
    results = json.loads((run_dir / "results.json").read_text())
    assert set(results["replicas"]) == set(pods) and results["unattributed"] == 0, results["replicas"]
    scraped = (run_dir / "prometheus" / "prometheus.yml").read_text()  # each listed replica's /metrics
    assert all(url.removeprefix("http://") in scraped for url in fleet.replicas.values()), scraped
    rows = [line for line in (run_dir / "report.md").read_text().splitlines() if line.startswith("| vllm-5d8f7")]
    assert len(rows) == 2 and not any("n/a" in row for row in rows), rows  # the engine's view joins by name
