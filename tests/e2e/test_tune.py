"""`loadwatch tune` on the embedded engine started mis-tuned (--max-num-seqs=2, a roomy KV cache), one
step and no more: the baseline names batch slots, and the trial proves on the real vLLM that a
larger --max-num-seqs lowers the TTFT p90 where the baseline broke. The budget ends tune during the
capacity search after the adopted change, so the test stays short; the full loop's figures are
benchmarks/tune.py's, and the loop itself is tested against a fake of known slots
(tests/integration/tune/test_tune.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.e2e.test_capacity import TWO_SLOTS


def test_the_mis_tuned_engines_batch_slots_are_named_and_more_seqs_proven_better(tmp_path):
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "tune", "--mode", "users", "--slo", "ttft_p90_ms=200", "--start", "2",
         "--level-duration", "5s", "--warmup", "2s", "--cool-down", "2s", "--repeats", "2", "--max-steps", "1",
         "--budget", "20m",
         "--out", str(tmp_path / "runs"), *(f"--vllm-arg={a}" for a in TWO_SLOTS),
         "--", "--max-tokens", "300", "--ignore-eos"],
        capture_output=True, text=True, timeout=900, env=env)
    output = run.stdout + run.stderr
    print(output[-4000:])
    (run_dir,) = (tmp_path / "runs").iterdir()
    doc = json.loads((run_dir / "tune.json").read_text())
    assert doc["baseline"]["limit"] == "batch_slots", doc["baseline"]
    assert doc["baseline"]["capacity"]["max_sustainable"] == 2
    step = doc["steps"][0]
    assert step["change"]["flag"] == "--max-num-seqs" and step["change"]["from"] == "2"
    assert int(step["change"]["to"]) == 8 and step["verdict"] == "adopted", step
    assert step["gain"]["metric"] == "ttft_p90_ms" and step["gain"]["ci_high"] < 0, step["gain"]
    assert step["capacity_after"]["max_sustainable"] > 2 and step["limit_after"], step
    assert doc["final"]["vllm_args"][-1] == "--max-num-seqs=8" and doc["stopped"] == "--max-steps (1) reached"
    assert run.returncode == 0 and "Traceback" not in output, output[-3000:]
    assert doc["cost"]["server_starts"] == 6
