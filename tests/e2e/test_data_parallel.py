"""One embedded vLLM of two data-parallel ranks (`--data-parallel-size 2`): each rank seen on its own,
and a rank that queues while the other has room named `imbalance`, with both ranks' peaks. The load
is skewed as a router that pins requests does it: every request carries X-data-parallel-rank: 0, which
vLLM's balancer obeys (vllm/v1/engine/core_client.py), so rank 0's two batch slots fill while rank 1
stays idle."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from loadwatch.engine.settings import EngineSettings
from loadwatch.stack.readback import data_of, prometheus_on

RANKS = ("--data-parallel-size=2", "--max-num-seqs=2", "--max-model-len=1024")


def test_a_rank_pinned_busy_beside_an_idle_one_is_named_imbalance_with_each_ranks_peaks(tmp_path):
    """Short: the level of 4 users (half of them waiting for rank 0's two slots, so a p80 counts a
    wait) breaks, and the search stops after the next one (--max-duration); a p80 needs 25 requests
    a level, a p90 50."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--mode", "users", "--slo", "ttft_p80_ms=200",
         "--start", "4", "--level-duration", "10s", "--warmup", "2s", "--cool-down", "2s", "--max-duration", "30s",
         "--out", str(tmp_path / "runs"), *(f"--vllm-arg={a}" for a in RANKS),
         "--", "--max-tokens", "100", "--ignore-eos", "--header", "X-data-parallel-rank:0"],
        capture_output=True, text=True, timeout=900, env=env)
    output = run.stdout + run.stderr
    print(output[-3000:])
    assert "Traceback" not in output
    (run_dir,) = (tmp_path / "runs").iterdir()
    result = json.loads((run_dir / "capacity.json").read_text())
    evidence = result["evidence"]
    assert result["limit"] == "imbalance", (result["limit"], evidence)
    assert (evidence["busiest_rank"], evidence["ranks_with_room"], evidence["rank_limit"]) == ("0", ["1"],
                                                                                              "batch_slots"), evidence
    (server,) = evidence["ranks"]
    ranks = evidence["ranks"][server]
    assert ranks["0"]["requests_waiting_peak"] >= 1 and ranks["0"]["requests_running_peak"] == 2
    assert ranks["1"]["requests_waiting_peak"] == 0 and ranks["1"]["requests_running_peak"] == 0
    assert f"The data-parallel ranks of {server} at that level: rank 0:" in (run_dir / "report.md").read_text()
    # Two engine cores really ran: the sidecar exported each rank's series, and vLLM's log names both.
    end = max(lv["end"] for lv in result["levels"])
    data = data_of(run_dir)
    assert data is not None
    with prometheus_on(data, run_dir / "logs") as api:
        seen = api.query("count by (engine) (last_over_time(loadwatch_engine_requests_running[1h]))", end)
    assert sorted(s["metric"]["engine"] for s in seen) == ["0", "1"]
    log = (EngineSettings().state_dir / "vllm.log").read_text()
    assert "EngineCore_DP0" in log and "EngineCore_DP1" in log
