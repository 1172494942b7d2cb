"""Does a capacity search give the same answer twice? The same search run several times, each on a fresh
stack (its own engine start), printing each knee with its interval and the engine's probe, then their
spread and whether each run's interval, and its rerun interval (where a second search on another
start of an engine its probe cannot tell apart may land), holds the other runs' knees.

Scenarios (the embedded engine's):
- `make-run`: `make run`'s search (a KV cache of 20 blocks, TTFT p90 under 1 s, users);
- `slots` and `prefix`: the baselines of the tune guide's two scenarios (benchmarks/tune.py).

`--busy` keeps one core busy for the whole benchmark (a spinning process, stopped at the end): how a
busier machine moves the knee and the probe.

    .venv/bin/python benchmarks/reproducibility.py [--scenario make-run|slots|prefix|all] [--runs 3] [--busy]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from loadwatch.metrics.capacity import Capacity

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from tune import SCENARIOS as TUNE  # noqa: E402  the tune guide's scenarios, one home
from tune import SEARCH  # noqa: E402


def small_engine() -> list[str]:
    """make run's engine flags, as the Makefile reads them."""
    said = subprocess.run([sys.executable, "-m", "loadwatch.engine.small"], capture_output=True, text=True, check=True)
    return said.stdout.split()


def scenarios() -> dict[str, tuple[list[str], list[str]]]:
    """name -> (capacity's options, the workload after --)."""
    return {"make-run": ([*small_engine(), *SEARCH], ["--max-tokens", "200", "--ignore-eos"]),
            **{name: ([*SEARCH, *flags], workload) for name, (flags, workload) in TUNE.items()}}


def search(options: list[str], workload: list[str], out: Path) -> dict:
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(out / "home")}
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "loadwatch.cli", "capacity", *options, "--out", str(out), "--",
                           *workload], capture_output=True, text=True, env=env)
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and p.name != "home"]
    result = Capacity.read(run_dir / "capacity.json").model_dump(mode="json")  # validated; every key, defaults in
    return {**result, "code": done.returncode, "wall": time.monotonic() - began, "folder": str(run_dir)}


def line(i: int, r: dict) -> str:
    low, high = r.get("max_sustainable_interval") or (None, None)
    probe = r.get("probe") or {}
    top = r.get("throughput_plateau") or {}
    return (f"run {i}: {r['max_sustainable']} {r['unit']} [{low}, {high}], limit {r['limit']}, "
            f"probe TTFT {probe.get('ttft_ms', float('nan')):.1f} ms TPOT {probe.get('tpot_ms', float('nan')):.2f} ms, "
            f"throughput flat from {top.get('level')} ({top.get('most_request_throughput') or 0:.2f} req/s at most), "
            f"{r['wall'] / 60:.1f} min, exit {r['code']}")


def report(name: str, results: list[dict]) -> None:
    print(f"## {name}")
    for i, r in enumerate(results, 1):
        print(line(i, r))
    knees = [r["max_sustainable"] for r in results if r["max_sustainable"] is not None]
    if not knees:
        print("no run located a knee")
        return
    print(f"knees {knees}: spread {max(knees) - min(knees):g} {results[0]['unit']} "
          f"({(max(knees) - min(knees)) / max(knees):.0%} of the highest)")
    for i, r in enumerate(results, 1):
        others = [k for j, k in enumerate(knees, 1) if j != i]
        for key, what in (("max_sustainable_interval", "interval"), ("rerun_interval", "rerun interval")):
            low, high = r.get(key) or (None, None)
            outside = [k for k in others if high is None or k > high or (low is not None and k < low)]
            print(f"run {i}'s {what} [{low}, {high}] " + ("holds every other knee" if not outside else
                                                           f"misses {outside}"))
    ttfts = [r["probe"]["ttft_ms"] for r in results if r.get("probe")]
    tpots = [r["probe"]["tpot_ms"] for r in results if r.get("probe")]
    if ttfts:
        print(f"probe spread: TTFT {min(ttfts):.1f} to {max(ttfts):.1f} ms, TPOT {min(tpots):.2f} to "
              f"{max(tpots):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=["make-run", *TUNE, "all"], default="make-run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "reproducibility")
    args = parser.parse_args()
    known = scenarios()
    names = list(known) if args.scenario == "all" else [args.scenario]
    spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if args.busy else None
    try:
        for name in names:
            options, workload = known[name]
            folder = args.out / time.strftime("%Y%m%dT%H%M%S") / name
            report(name + (" (one core kept busy)" if args.busy else ""),
                   [search(options, workload, folder / f"run-{i}") for i in range(1, args.runs + 1)])
    finally:
        if spinner:
            spinner.kill()
            spinner.wait()


if __name__ == "__main__":
    main()
