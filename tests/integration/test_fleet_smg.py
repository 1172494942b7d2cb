"""smg, the second router (issue 60), for real in front of two fake replicas that answer with vLLM's own
fingerprint, the same on both: started as the embedded fleet starts it, scaled through its worker API,
each request attributed by its x-smg-routed-worker-id header alone, and its metrics read by the sidecar
as loadwatch_router_*. Fake replicas: the router is what is tested."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

from loadwatch import processes
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_router
from loadwatch.fleet.options import Fleet
from loadwatch.fleet.routers import router
from loadwatch.fleet.scale import Scaler
from tests.conftest import free_port, headless_run, scrape, total, wait_for

VLLMS_OWN = "vllm-0.32.0-4dbb0481"  # what a replica started without --fingerprint-mode custom answers with


@contextlib.contextmanager
def behind_smg(fake_server):
    settings = EngineSettings()
    smg = router("smg")
    ensure_router(settings, smg.requirement)
    replicas = {name: fake_server("--fingerprints", VLLMS_OWN, "--vllm-metrics", "--ttft", "0.02", "--itl", "0.01",
                                  "--tokens", "8").url for name in ("a", "b")}
    port, metrics = free_port(), free_port()
    command = smg.command(settings.python, port, metrics, list(replicas.values()), smg.default_policy, [])
    started = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: processes.answers(url + smg.health_path), 60, "smg")
        yield Fleet("smg", url, replicas, f"http://127.0.0.1:{metrics}", smg.default_policy)
    finally:
        started.terminate()
        started.wait(30)  # it drains for about 5 s first


@contextlib.contextmanager
def sidecar(fleet: Fleet):
    """The sidecar as a stack starts it for a fleet: each replica a target, the router by its kind."""
    port = free_port()
    started = subprocess.Popen(
        [sys.executable, "-m", "loadwatch.cli", "exporter", *(f"--target={n}={u}" for n, u in fleet.replicas.items()),
         f"--router={fleet.router}={fleet.metrics}", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: processes.answers(f"http://127.0.0.1:{port}/metrics"), 60, "the sidecar")
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        started.terminate()
        started.wait(30)


def test_smg_is_scaled_and_names_the_replica_of_every_request_and_the_sidecar_reads_its_counts(fake_server,
                                                                                               tmp_path):
    with behind_smg(fake_server) as fleet:
        scaler = Scaler(fleet)
        scaler.scale_to(1, lambda line: None)
        assert scaler.serving_names() == ["a"]
        scaler.scale_to(2, lambda line: None)  # b drained a moment ago: smg adds it again once it is gone
        assert scaler.serving() == sorted(fleet.replicas.values())
        with sidecar(fleet) as metrics:
            done = headless_run(fleet.url, tmp_path / "results.json", *fleet.locust_options(), "-u", "4", "-r", "4",
                                "--num-requests", "40")
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            results = json.loads((tmp_path / "results.json").read_text())
            served = {name: figures["completed"] for name, figures in results["replicas"].items()}
            assert results["completed"] == 40 and results["unattributed"] == 0, results["replicas"]
            assert served == {"a": 20, "b": 20}, "round robin"
            assert "none of the replicas' names" not in done.stderr

            def sent() -> dict[str, float]:
                samples = scrape(metrics)
                return {name: total(samples, "loadwatch_router_replica_requests_total", router="smg", replica=name)
                        for name in fleet.replicas}

            # smg's own count of what it sent each replica, as the sidecar names it, is the client's
            wait_for(lambda: sent() == served, 15, f"the sidecar's count of smg's sends to be {served}")
