"""`loadwatch capacity` against a server of known capacity (4 streams at once, 140 ms each: 28.6
requests/s at most) that exports no vLLM metrics: it finds the knee below that, within its
precision, names the limit "SLO only", and leaves its verdict, levels, report and plot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs("prometheus")
CAPACITY = 4 / (0.05 + 9 * 0.01)


def capacity(tmp_path, target: str, *options: str) -> tuple[int, str, Path, dict]:
    """`loadwatch capacity` run as a user runs it: its exit code, output, run folder and capacity.json."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-m", "loadwatch.cli", "capacity", "--target", target, *options,
                          "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=400, env=env)
    output = run.stdout + run.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run.returncode, output, run_dir, json.loads((run_dir / "capacity.json").read_text())


def test_the_knee_of_a_server_of_known_capacity(fake_server, tmp_path):
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "10", "--max-concurrency", "4")
    code, output, run_dir, result = capacity(
        tmp_path, server.url, "--slo", "ttft_p90_ms=200", "--level-duration", "5s", "--warmup", "1s", "--cool-down",
        "1s", "--start", "5", "--max-duration", "4m")
    assert code == 0, output
    assert (result["mode"], result["unit"], result["limit"]) == ("rate", "req/s", "slo_only")
    best = result["max_sustainable"]
    assert 0.5 * CAPACITY <= best <= CAPACITY, output
    broken_above = [lv["level"] for lv in result["levels"] if not lv["passed"] and lv["level"] > best]
    assert broken_above and min(broken_above) / best - 1 <= 0.1  # the stated precision
    assert result["recommended"] == pytest.approx(0.8 * best, abs=0.01)
    assert result["output_throughput_at_max"] > 0 and "requests" in result["level_rule"]
    assert any(lv["stopped_early"] for lv in result["levels"]), "40 req/s, 1.4 times the capacity, is cut short"
    first = result["levels"][0]
    records = [json.loads(line) for line in (run_dir / "levels" / "level-01.requests.jsonl").read_text().splitlines()]
    assert {r["stage"] for r in records} <= {"level-01", "warmup"} and first["name"] == "level-01"
    assert "## Capacity" in (run_dir / "report.md").read_text()
    assert (run_dir / "capacity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"capacity: {best:g} req/s sustained" in output and "Traceback" not in output


def test_a_search_whose_levels_are_too_short_to_judge_says_so(fake_server, tmp_path):
    """Requests of 4.6 s against 1 s levels (4 s at most): the first level completes too few to
    judge, so the search names no knee, says why and what would do, and exits 1."""
    server = fake_server("--ttft", "0.1", "--itl", "0.5", "--tokens", "10")
    code, output, run_dir, result = capacity(
        tmp_path, server.url, "--slo", "ttft_p90_ms=2000", "--mode", "users", "--start", "1", "--level-duration",
        "1s", "--warmup", "0s", "--cool-down", "0s")
    assert code == 1, output
    assert len(result["levels"]) == 1 and "too few requests to judge" in result["undecided"], result
    assert "a longer --level-duration would do" in result["undecided"]
    assert "The knee was not located" in (run_dir / "report.md").read_text()
    assert "the knee was not located" in output and "Traceback" not in output
