"""What `loadwatch compare` costs on large runs: two runs of N requests each (one per-request
record a line, as a run writes them), compared with their 95 % intervals. It prints the time and
the peak RSS for each N.

    .venv/bin/python benchmarks/compare_cost.py [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_run(folder: Path, n: int, ttft_ms: float, seed: int) -> Path:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    with open(folder / "results.requests.jsonl", "w") as out:
        for i in range(n):
            ttft = rng.lognormvariate(0, 0.3) * ttft_ms / 1000
            out.write(json.dumps({
                "id": f"{i:032x}", "start": 1_800_000_000 + i * 0.01, "worker": "local", "model": "m",
                "scenario": "chat", "stage": "load", "failure": None, "elapsed_s": ttft + 2.0, "ttft_s": ttft,
                "headers_s": ttft / 2, "tpot_s": 0.016, "prompt_tokens": 512, "output_tokens": 128,
                "tokens_from": "usage"}) + "\n")
    (folder / "results.json").write_text(json.dumps({
        "run_id": folder.name, "completed": n, "started_at": 1_800_000_000, "ended_at": 1_800_000_000 + n * 0.01,
        "records": "results.requests.jsonl"}))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    args = parser.parse_args()
    print(f"{'requests a run':>15} {'seconds':>8} {'peak RSS MiB':>13}")
    for n in (int(v) for v in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = write_run(Path(tmp, "a"), n, 100, 1), write_run(Path(tmp, "b"), n, 95, 2)
            started = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "loadwatch.cli", "compare", str(a), str(b)],
                                  capture_output=True, text=True, check=True)
            took = time.monotonic() - started
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            verdict = next(line for line in done.stdout.splitlines() if line.startswith("| median TTFT"))
            print(f"{n:>15,} {took:>8.1f} {peak:>13.0f}   {verdict}")


if __name__ == "__main__":
    main()
