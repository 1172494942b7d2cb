"""`loadwatch capacity` on the embedded engine names the limit that binds: a KV cache of 20 blocks
is KV-bound, two batch slots with a roomy cache are slot-bound. (A target without vLLM's metrics
is "SLO only": tests/capacity/test_capacity_run.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e
SMALL_KV = ["--num-gpu-blocks-override=20", "--max-num-seqs=8", "--max-model-len=288"]


# The two-slot case (batch_slots) ran here too; it is left to the diagnosis's unit tests to keep CI
# under 30 minutes: `make run` is this small-KV search.
@pytest.mark.parametrize("vllm_args, limit", [(SMALL_KV, "kv_cache")], ids=["small-kv-cache"])
def test_the_binding_limit_is_named_with_its_evidence(tmp_path, vllm_args, limit):
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--mode", "users", "--slo", "ttft_p90_ms=1000",
         "--start", "4", "--level-duration", "6s", "--warmup", "2s", "--cool-down", "2s", "--max-duration", "80s",
         "--out", str(tmp_path / "runs"), *(f"--vllm-arg={a}" for a in vllm_args),
         "--", "--max-tokens", "200", "--ignore-eos"],
        capture_output=True, text=True, timeout=600, env=env)
    output = run.stdout + run.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    result = json.loads((run_dir / "capacity.json").read_text())
    print(output[-2000:])
    assert result["limit"] == limit, (result["limit"], result["evidence"])
    assert result["evidence"]["requests_waiting_peak"] >= 1
    if limit == "kv_cache":
        assert result["evidence"]["kv_cache_usage_peak"] >= 0.9
    else:
        assert result["evidence"]["kv_cache_usage_peak"] < 0.9 and result["evidence"]["requests_running_peak"] <= 2
    assert result["max_sustainable"] is not None and run.returncode == 0
    assert "## Capacity" in (run_dir / "report.md").read_text()
