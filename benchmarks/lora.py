"""LoRA adapters on one embedded vLLM, as a user runs them, in the scenarios of docs/guides/lora.md:
the 4 local adapters (`--vllm-arg=--enable-lora`), one slot a batch (`--max-loras 1`), the traffic
split evenly over the 4 (`--model lora-1,lora-2,lora-3,lora-4`).

- **capacity**: the search; printed: the users held, the limit (lora_slots expected), its evidence,
  and each adapter's TTFT and TPOT at every level.
- **tune**: one step of tune from there; printed: the lever it tried (--max-loras expected), its gain
  and interval, whether it was adopted, and the capacity after it.
- **experiment**: experiments/lora-slots.yaml (--max-loras 1 against 4); printed: its verdicts.

    .venv/bin/python benchmarks/lora.py [--scenario capacity|tune|experiment|all]
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

CLI = [sys.executable, "-m", "loadwatch.cli"]
ENGINE = ["--vllm-arg=--enable-lora", "--vllm-arg=--max-loras=1", "--vllm-arg=--max-model-len=1024"]
SEARCH = ["--mode", "users", "--start", "4", "--slo", "ttft_p90_ms=300", "--level-duration", "10s", "--warmup", "2s",
          "--cool-down", "2s"]
SPLIT = ["--", "--model", "lora-1,lora-2,lora-3,lora-4", "--max-tokens", "64", "--ignore-eos"]


def loadwatch(folder: Path, command: str, *args: str) -> tuple[Path, str]:
    """A loadwatch command in its own stack home: its run folder and its output."""
    started = time.monotonic()
    done = subprocess.run([*CLI, command, "--out", str(folder / "runs"), *args], capture_output=True, text=True,
                          env={**os.environ, "LOADWATCH_STACK_HOME": str(folder / "home")})
    if done.returncode not in (0, 1, 3):
        sys.exit(done.stdout[-4000:] + done.stderr[-2000:])
    print(f"  {command}: {time.monotonic() - started:.0f} s")
    return next((folder / "runs").iterdir()), done.stdout + done.stderr


def capacity() -> None:
    print("capacity: 4 adapters, --max-loras 1, an even split, SLO TTFT p90 300 ms")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, _ = loadwatch(Path(tmp), "capacity", *ENGINE, *SEARCH, *SPLIT)
        result = json.loads((run_dir / "capacity.json").read_text())
        levels = sorted((run_dir / "levels").glob("level-*.json"))
        print(f"  {result['max_sustainable']} users held; limit {result['limit']}; evidence "
              + ", ".join(f"{k} {v}" for k, v in result["evidence"].items() if k.startswith(("lora_", "requests_"))))
        for path in levels:
            models = json.loads(path.read_text()).get("models") or {}
            print(f"    {path.stem}: " + "; ".join(
                f"{name} TTFT median {m.get('median_ttft_ms', 0):.1f} ms, "
                f"TPOT median {m.get('median_tpot_ms', 0):.2f} ms" for name, m in sorted(models.items())))


def tune() -> None:
    print("tune: one step from 4 adapters, --max-loras 1, 2 repeats")
    with tempfile.TemporaryDirectory() as tmp:
        _, output = loadwatch(Path(tmp), "tune", *ENGINE, *SEARCH, "--max-steps", "1", "--repeats", "2",
                              "--budget", "15m", *SPLIT)
        for line in output.splitlines():
            if "step 1:" in line or "capacity:" in line or "final:" in line:
                print("  " + line.removeprefix("loadwatch: ").strip())


def experiment() -> None:
    print("experiment: experiments/lora-slots.yaml, cells of 20 s")
    with tempfile.TemporaryDirectory() as tmp:
        _, output = loadwatch(Path(tmp), "experiment", "lora-slots", "--duration", "20s")
        for line in output.splitlines():
            if " against " in line:
                print("  " + line.removeprefix("loadwatch: ").strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("capacity", "tune", "experiment", "all"), default="all")
    scenario = parser.parse_args().scenario
    for name, run in (("capacity", capacity), ("tune", tune), ("experiment", experiment)):
        if scenario in (name, "all"):
            run()


if __name__ == "__main__":
    main()
