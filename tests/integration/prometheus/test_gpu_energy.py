"""Energy per output token from DCGM's energy counter (issue 41), on synthetic series: no GPU here.
Two GPUs' `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ since boot) at known watts are written as
OpenMetrics, backfilled with promtool into a TSDB, and read by the report's own query through a
real Prometheus."""

from __future__ import annotations

import subprocess
import time

import pytest

from loadwatch.report.engine import GPU_ENERGY, engine_figures
from loadwatch.stack.readback import prometheus_on

pytestmark = pytest.mark.needs("promtool")
WATTS = {"0": 300.0, "1": 200.0}


def test_the_gpus_energy_over_a_run_is_read_from_their_counters(tmp_path):
    start = int(time.time()) - 3600  # an hour ago: inside retention, outside the head
    lines = [f"# TYPE {GPU_ENERGY} counter"]
    for t in range(start - 60, start + 241, 15):  # a scrape every 15 s, from before the run to after it
        for gpu, watts in WATTS.items():
            lines.append(f'{GPU_ENERGY}{{gpu="{gpu}",Hostname="node-1"}} {5e9 + watts * 1000 * (t - start):.0f} {t}')
    (tmp_path / "dcgm.om").write_text("\n".join(lines) + "\n# EOF\n")
    data = tmp_path / "data"
    done = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(tmp_path / "dcgm.om"),
                           str(data)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    with prometheus_on(data, tmp_path / "logs") as api:
        figures = engine_figures(api, start, start + 120, settle=15)
    # 500 W for the 135 s the counters' window spans (the run's 120 s and the settle), in joules.
    assert figures["gpu_energy_joules"] == pytest.approx(500 * 135, rel=0.02)
    assert figures["kv_cache_usage_peak"] is None  # no engine series: only the GPUs'
