"""The release gate and the history on the embedded engine, as a user runs them (issue 50's done-when):

- two runs of one configuration: `loadwatch compare` exits 0; the same workload on the engine started
  with --max-num-seqs=1 (one request at a time): exit 3, naming TTFT with its interval;
- six runs in a history, the sixth on the slowed engine: the page marks the sixth and `history --gate`
  exits 3; without the sixth, 0.

The engine starts twice (`loadwatch up`, its default flags then --max-num-seqs=1); each run is a
headless Locust run of 4 users for 20 s against it, its per-request records kept.

    .venv/bin/python benchmarks/release_gate.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [sys.executable, "-m", "loadwatch.cli"]
LOAD = ["--headless", "-u", "4", "-r", "4", "-t", "20s", "--stop-timeout", "10", "--dataset", "random",
        "--input-len", "128", "--max-tokens", "32", "--metrics-port", "0"]


def loadwatch(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True,
                          env={**os.environ, "LOADWATCH_STACK_HOME": str(home)})


def runs_on_engine(folder: Path, home: Path, names: list[str], *flags: str) -> None:
    """The engine up with `flags`, a run per name, down."""
    up = loadwatch(home, "up", "--out", str(folder / "stacks"), *(["--", *flags] if flags else []))
    if up.returncode != 0:
        sys.exit(up.stdout[-3000:] + up.stderr[-3000:])
    target = re.search(r"target \(vLLM\): (\S+)", up.stdout).group(1)
    locustfile = loadwatch(home, "locustfile").stdout.strip()
    try:
        for name in names:
            results = folder / name / "results.json"
            run = subprocess.run([sys.executable, "-m", "locust", "-f", locustfile, "-H", target, *LOAD,
                                  "--results-json", str(results)], capture_output=True, text=True)
            print(f"  {name}: locust exit {run.returncode}")
    finally:
        loadwatch(home, "down", str(next((folder / "stacks").iterdir())))
        for stack in (folder / "stacks").iterdir():
            subprocess.run(["rm", "-rf", str(stack)], check=False)


def tail(done: subprocess.CompletedProcess, lines: int = 4) -> str:
    return "\n".join("    " + line for line in done.stdout.strip().splitlines()[-lines:])


def main() -> None:
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        folder, home = Path(tmp), Path(tmp) / "home"
        names = [f"r{i}" for i in range(1, 6)]
        print("five runs on the embedded engine, then one on it with --max-num-seqs=1")
        runs_on_engine(folder, home, names)
        runs_on_engine(folder, home, ["slow"], "--max-num-seqs=1")
        same = loadwatch(home, "compare", str(folder / "r1"), str(folder / "r2"))
        print(f"  compare r1 r2: exit {same.returncode}\n{tail(same)}")
        slower = loadwatch(home, "compare", str(folder / "r1"), str(folder / "slow"))
        print(f"  compare r1 slow: exit {slower.returncode}\n{tail(slower)}")
        db, steady = folder / "history.db", folder / "steady.db"
        for name in names:
            for history in (db, steady):
                loadwatch(home, "history", "add", str(folder / name), "--history", str(history), "--label", name)
        loadwatch(home, "history", "add", str(folder / "slow"), "--history", str(db), "--label", "slow")
        gate = loadwatch(home, "history", str(db), "--gate")
        page = (folder / "history.html").read_text()
        marked = re.findall(r"Changes beyond doubt: ([^&<]*)", page)
        print(f"  history of six, --gate: exit {gate.returncode}; the page's changes: {marked[:1]}\n{tail(gate)}")
        without = loadwatch(home, "history", str(steady), "--gate")
        print(f"  history of the first five, --gate: exit {without.returncode}\n{tail(without, 2)}")
    print(f"  wall time {(time.monotonic() - began) / 60:.1f} min")


if __name__ == "__main__":
    main()
