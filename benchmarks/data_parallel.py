"""Data-parallel ranks inside one embedded vLLM, as a user runs them: `loadwatch capacity
--vllm-arg=--data-parallel-size=N` on this machine, in the scenarios of docs/guides/data-parallel.md.

- **sharing**: the same search on one rank and on two, each rank with --max-num-seqs=2 (so the batch
  binds before the cores do). Printed for each: the users held, the limit, the output throughput at
  the knee, and each rank's peaks there. On a machine whose engine has one core, the two ranks share
  it: twice the slots, not twice the compute.
- **pinned**: two ranks, every request carrying X-data-parallel-rank: 0 (a router pinning them).
  Printed: the limit (imbalance expected), the rank that queued and its own limit, each rank's peaks.

    .venv/bin/python benchmarks/data_parallel.py [--scenario sharing|pinned|all]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadwatch.metrics.capacity import Capacity

CLI = [sys.executable, "-m", "loadwatch.cli"]
SEARCH = ["--mode", "users", "--slo", "ttft_p90_ms=500", "--start", "2", "--level-duration", "20s",
          "--max-duration", "8m", "--vllm-arg=--max-num-seqs=2", "--vllm-arg=--max-model-len=1024"]
LOAD = ["--", "--max-tokens", "200", "--ignore-eos"]


def capacity(ranks: int, *locust: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        folder, started = Path(tmp), time.monotonic()
        done = subprocess.run([*CLI, "capacity", "--out", str(folder / "runs"), *SEARCH,
                               f"--vllm-arg=--data-parallel-size={ranks}", *LOAD, *locust],
                              capture_output=True, text=True,
                              env={**os.environ, "LOADWATCH_STACK_HOME": str(folder / "home")})
        if done.returncode not in (0, 1):
            sys.exit(done.stdout[-4000:] + done.stderr[-2000:])
        run_dir = next((folder / "runs").iterdir())
        result = Capacity.read(run_dir / "capacity.json").model_dump(mode="json")
    evidence = result["evidence"]
    knee = next((lv for lv in result["levels"] if lv["level"] == result["max_sustainable"]), None)
    served = knee["client"].get("output_throughput") if knee else None
    busiest = (f" (rank {evidence['busiest_rank']} at its own {evidence['rank_limit']}; with room: "
               f"{', '.join(evidence['ranks_with_room'])})" if "busiest_rank" in evidence else "")
    print(f"  {ranks} rank(s): {result['max_sustainable']} users held; limit {result['limit']}{busiest}; "
          f"output {served if served is None else f'{served:.0f}'} tok/s at the knee; "
          f"{time.monotonic() - started:.0f} s")
    for server, each in (evidence.get("ranks") or {}).items():
        for rank, peaks in each.items():
            print(f"    {server} rank {rank}: peaks {peaks['requests_waiting_peak']} waiting, "
                  f"{peaks['requests_running_peak']} running, KV cache {peaks['kv_cache_usage_peak']}")
    return result


def sharing() -> None:
    print("sharing: one rank, then two, each with --max-num-seqs=2; TTFT p90 under 500 ms")
    capacity(1)
    capacity(2)


def pinned() -> None:
    print("pinned: two ranks, every request sent to rank 0 (X-data-parallel-rank: 0)")
    capacity(2, "--header", "X-data-parallel-rank:0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("sharing", "pinned", "all"), default="all")
    scenario = parser.parse_args().scenario
    for name, run in (("sharing", sharing), ("pinned", pinned)):
        if scenario in (name, "all"):
            run()


if __name__ == "__main__":
    main()
