"""`loadwatch capacity` on the embedded engine names the limit that binds: a KV cache of 20 blocks
is KV-bound. (Two batch slots with a roomy cache, slot-bound, is the diagnosis's unit test; a
target without vLLM's metrics is "SLO only": tests/integration/capacity/test_capacity_run.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from loadwatch.engine.small import SMALL_KV


def test_a_small_kv_cache_is_named_the_limit_with_its_evidence(tmp_path):
    """`make run`'s search; the two-slot case ran here too, and is left to the diagnosis's unit
    tests to keep CI under 30 minutes. No --max-duration: levels stretch until they complete the 50
    requests a p90 needs (about 20 s each here), and a search cut short names no knee."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--mode", "users", "--slo", "ttft_p90_ms=1000",
         "--start", "4", "--level-duration", "6s", "--warmup", "2s", "--cool-down", "2s",
         "--out", str(tmp_path / "runs"), *(f"--vllm-arg={a}" for a in SMALL_KV),
         "--", "--max-tokens", "200", "--ignore-eos"],
        capture_output=True, text=True, timeout=600, env=env)
    output = run.stdout + run.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    result = json.loads((run_dir / "capacity.json").read_text())
    print(output[-2000:])
    assert result["limit"] == "kv_cache", (result["limit"], result["evidence"])
    assert result["evidence"]["requests_waiting_peak"] >= 1
    assert result["evidence"]["kv_cache_usage_peak"] >= 0.9
    assert result["max_sustainable"] is not None and run.returncode == 0
    assert "## Capacity" in (run_dir / "report.md").read_text()
