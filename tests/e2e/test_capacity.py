"""The capacity search on the embedded engine names the limit that binds, with its evidence: `make
run` itself, as README's first command (a KV cache of 20 blocks: KV-bound), and two batch slots with
a roomy cache (slot-bound). A target without vLLM's metrics is "SLO only":
tests/integration/capacity/test_capacity_run.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

TWO_SLOTS = ("--max-num-seqs=2", "--max-model-len=1024")  # and the engine's full KV cache: 65,536 blocks


def conclusion(runs: Path) -> tuple[Path, dict]:
    (run_dir,) = runs.iterdir()
    return run_dir, json.loads((run_dir / "capacity.json").read_text())


def test_make_run_finds_what_the_small_engine_sustains_and_names_its_kv_cache(tmp_path):
    """As a user runs it, its defaults untouched but where the run folder goes. Its levels run until
    they complete the requests a p90 needs, however slow the machine (15 s at least, 120 s at most:
    about a minute at one user here), so the knee is found on a slow machine as on a fast one."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "run",
                          f"RUN_ARGS=--out {tmp_path / 'runs'}"], capture_output=True, text=True, timeout=1200, env=env)
    output = run.stdout + run.stderr
    print(output[-3000:])
    run_dir, result = conclusion(tmp_path / "runs")
    assert result["limit"] == "kv_cache", (result["limit"], result["evidence"])
    assert result["evidence"]["requests_waiting_peak"] >= 1
    assert result["evidence"]["kv_cache_usage_peak"] >= 0.9
    assert result["max_sustainable"] is not None and run.returncode == 0, output[-3000:]
    assert "## Capacity" in (run_dir / "report.md").read_text() and (run_dir / "report.html").is_file()
    assert "Traceback" not in output


def test_two_batch_slots_are_named_the_limit_with_a_roomy_kv_cache(tmp_path):
    """Two users fill both slots; with a third, a request waits for one about as long as an answer
    takes, over a TTFT p90 of 200 ms: 2 users held, 4 and 3 broke (lost early), and the engine says
    why. Answers of 300 tokens take 0.6 s on this machine and 1.8 s on a slower one: with 100, which
    took 0.6 s on the slower machine, they took 0.19 s on a faster one, where 4 users waited under
    200 ms and held. Levels as long as `make run`'s, for the same reason."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--mode", "users", "--slo", "ttft_p90_ms=200",
         "--start", "2", "--level-duration", "15s", "--warmup", "2s", "--cool-down", "2s",
         "--out", str(tmp_path / "runs"), *(f"--vllm-arg={a}" for a in TWO_SLOTS),
         "--", "--max-tokens", "300", "--ignore-eos"],
        capture_output=True, text=True, timeout=900, env=env)
    output = run.stdout + run.stderr
    print(output[-3000:])
    _, result = conclusion(tmp_path / "runs")
    assert result["limit"] == "batch_slots", (result["limit"], result["evidence"])
    evidence = result["evidence"]
    assert evidence["requests_waiting_peak"] >= 1 and evidence["requests_running_peak"] <= 2
    assert evidence["kv_cache_usage_peak"] < 0.9
    assert result["max_sustainable"] == 2 and run.returncode == 0, output[-3000:]
