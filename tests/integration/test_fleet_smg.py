"""smg, the second router (issue 60), for real in front of two fake replicas that answer with vLLM's own
fingerprint, the same on both: started as the embedded fleet starts it, scaled through its worker API,
each request attributed by its x-smg-routed-worker-id header alone, and its metrics read by the sidecar
as loadwatch_router_*; a failed request attributed by the same header where smg sends it. Fake replicas:
the router is what is tested."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

from loadwatch import processes
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_package
from loadwatch.fleet.routers import router
from loadwatch.fleet.scale import Scaler
from loadwatch.fleet.servers import HERE, FrontRouter, Servers
from loadwatch.metrics.records import read_records
from loadwatch.settings import records_beside
from tests.conftest import free_port, headless_run, scrape, total, wait_for

VLLMS_OWN = "vllm-0.32.0-4dbb0481"  # what a replica started without --fingerprint-mode custom answers with


@contextlib.contextmanager
def behind_smg(fake_server, faults: dict[str, tuple[str, ...]] | None = None):
    """smg in front of replicas a and b, each with its `faults` (sse_server's --fault options)."""
    settings = EngineSettings()
    smg = router("smg")
    ensure_package(settings, smg.requirement)
    replicas = {name: fake_server("--fingerprints", VLLMS_OWN, "--vllm-metrics", "--ttft", "0.02", "--itl", "0.01",
                                  "--tokens", "8", *(faults or {}).get(name, ())).url for name in ("a", "b")}
    port, metrics = free_port(), free_port()
    command = smg.command(settings.python, port, metrics, list(replicas.values()), smg.default_policy, [])
    started = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: processes.answers(url + smg.health_path), 60, "smg")
        yield Servers(owner=HERE, url=url, replicas=replicas,
                      router=FrontRouter(program="smg", metrics=f"http://127.0.0.1:{metrics}",
                                         policy=smg.default_policy))
    finally:
        started.terminate()
        started.wait(30)  # it drains for about 5 s first


@contextlib.contextmanager
def sidecar(fleet: Servers):
    """The sidecar as a stack starts it for a fleet: each replica a target, the router by its kind."""
    port = free_port()
    started = subprocess.Popen(
        [sys.executable, "-m", "loadwatch.cli", "exporter", *fleet.exporter_options(), "--host", "127.0.0.1",
         "--port", str(port)],
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


def test_a_failed_request_counts_against_the_replica_smg_names_in_its_error_answer(fake_server, tmp_path):
    """smg 1.13 passes a replica's error status on with the header (a 400: it retries a 5xx or 429 on the
    other replica first), and ends a stream the replica cut with an error event of its own in a 200 that
    has the header: each failure is its replica's, in the records and results.json's `replicas`."""
    faults = {"a": ("--fault", "http_400=4"), "b": ("--fault", "stream_cut=5")}
    with behind_smg(fake_server, faults) as fleet:
        results_json = tmp_path / "results.json"
        done = headless_run(fleet.url, results_json, *fleet.locust_options(), "-u", "2", "-r", "2",
                            "--num-requests", "40")
    results = json.loads(results_json.read_text())
    assert results["failures"] == {"http_400": 5, "stream_error": 4}, done.stdout[-3000:] + done.stderr[-3000:]
    replicas = {name: (r["completed"], r["failed"], r["failures"]) for name, r in results["replicas"].items()}
    assert replicas == {"a": (15, 5, {"http_400": 5}), "b": (16, 4, {"stream_error": 4})}, "round robin"
    assert results["unattributed"] == 0
    records = [r for r in read_records(records_beside(results_json)) if r.get("stage") != "warmup"]
    failed = {(r.get("replica"), r["failure"]) for r in records if r["failure"]}
    assert failed == {("a", "http_400"), ("b", "stream_error")}
