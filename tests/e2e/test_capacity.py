"""The capacity search on the embedded engine names the limit that binds, with its evidence: `make
run` itself, as README's first command (a KV cache of 20 blocks: KV-bound), and two batch slots with
a roomy cache (slot-bound). A target without vLLM's metrics is "SLO only":
tests/integration/capacity/test_capacity_run.py; a server that refuses past its admission cap is
named `admission` in tests/e2e/test_admission.py, on that module's engine."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from loadwatch.stack.readback import data_of, prometheus_on
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
    the_room_is_the_engines_own(run_dir, result)


def the_room_is_the_engines_own(run_dir: Path, result: dict) -> None:
    """The sidecar saw requests wait for capacity, and the limit sentence's KV cache in requests is
    vllm:cache_config_info's blocks and block size (one the null block) over the mean context."""
    evidence = result["evidence"]
    assert evidence["requests_waiting_capacity_peak"] >= 1, evidence
    end = max(lv["end"] for lv in result["levels"])
    data = data_of(run_dir)
    assert data is not None
    with prometheus_on(data, run_dir / "logs") as api:
        (info,) = api.query("last_over_time(vllm:cache_config_info[1h])", end)
    blocks, block_size = int(info["metric"]["num_gpu_blocks"]), int(info["metric"]["block_size"])
    assert (evidence["kv_cache_blocks"], evidence["kv_cache_block_size"]) == (blocks, block_size)
    holds = (blocks - 1) // math.ceil(evidence["mean_context_tokens"] / block_size)
    assert evidence["kv_cache_holds_requests"] == holds >= 1
    assert result["room"].startswith(f"The KV cache holds {holds} requests at the workload's mean context of "
                                     f"{evidence['mean_context_tokens']} tokens ({blocks} blocks of {block_size}")
    assert "the batch allows 8 (--max-num-seqs, the server's flags)" in result["room"]
    assert f"The KV cache holds {holds} requests" in (run_dir / "report.md").read_text()


def test_two_batch_slots_are_named_the_limit_with_a_roomy_kv_cache(tmp_path):
    """Two users fill both slots; with a third, a request waits for one to end, and at least half of
    them wait half an answer or more (the two slots' ends split an answer's time between them), over
    a TTFT p80 of 200 ms: 2 users held, 4 and 3 broke (lost early), and the engine says why. Answers
    of 300 tokens take 0.6 s on this machine and 1.8 s on a slower one: with 100, which took 0.6 s on
    the slower machine, they took 0.19 s on a faster one, where 4 users waited under 200 ms and held.
    A p80 needs 25 requests a level where a p90 needed 50 (2 users completed 1.4 a second in a run
    here: 18 s for 25, 36 s for 50); levels run on until they complete them, however slow the machine."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--mode", "users", "--slo", "ttft_p80_ms=200",
         "--start", "2", "--level-duration", "10s", "--warmup", "2s", "--cool-down", "2s",
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
    assert evidence["max_num_seqs"] == 2 and evidence["requests_waiting_capacity_peak"] >= 1


def test_a_shared_prefix_recomputed_with_prefix_caching_off_is_named_missed(tmp_path):
    """Every prompt starts with the same 256 tokens (8 blocks of 32) and the engine runs without its
    prefix cache: whatever limits it, capacity.json says that the prefix was prefilled again and
    again. The search is cut short by --max-duration after its first level (it had 40 s before): the
    missed item stands on one level's figures, without the knee."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--mode", "users", "--slo", "ttft_p90_ms=2000",
         "--start", "2", "--level-duration", "10s", "--warmup", "2s", "--cool-down", "2s", "--max-duration", "10s",
         "--out", str(tmp_path / "runs"), "--vllm-arg=--no-enable-prefix-caching",
         "--", "--dataset", "random", "--prefix-len", "256", "--input-len", "32", "--max-tokens", "16",
         "--ignore-eos"],
        capture_output=True, text=True, timeout=900, env=env)
    output = run.stdout + run.stderr
    print(output[-3000:])
    run_dir, result = conclusion(tmp_path / "runs")
    (item,) = result["missed"]
    assert item["item"] == "prefix_cache" and item["evidence"]["prefix_caching"] == 0, item
    assert item["evidence"]["shared_prefix_tokens"] == 256
    assert "prefix caching is off" in (run_dir / "report.md").read_text()
    assert "capacity: missed: the prompts share a 256-token prefix" in output
    assert "Traceback" not in output
