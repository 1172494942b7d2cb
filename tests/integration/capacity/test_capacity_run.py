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


def capacity(tmp_path, target: str, *options: str, timeout: float = 400) -> tuple[int, str, Path, dict]:
    """`loadwatch capacity` run as a user runs it: its exit code, output, run folder and capacity.json."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-m", "loadwatch.cli", "capacity", "--target", target, *options,
                          "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=timeout, env=env)
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
    """Requests of 4.6 s, one at a time, against 1 s levels (8 s at most): a level completes too few to
    judge, and more users complete no more, so the search names no knee, says why and what would
    do, and exits 1."""
    server = fake_server("--ttft", "0.1", "--itl", "0.5", "--tokens", "10", "--max-concurrency", "1")
    code, output, run_dir, result = capacity(
        tmp_path, server.url, "--slo", "ttft_p90_ms=2000", "--mode", "users", "--start", "1", "--level-duration",
        "1s", "--warmup", "0s", "--cool-down", "0s")
    assert code == 1, output
    assert len(result["levels"]) <= 3 and "too few requests to judge" in result["undecided"], result
    assert "a longer --level-duration would do" in result["undecided"]
    assert "The knee was not located" in (run_dir / "report.md").read_text()
    assert "the knee was not located" in output and "Traceback" not in output


def test_a_p99_slo_finds_the_knee_on_the_defaults(fake_server, tmp_path):
    """The command a user writes, its warm-up and cool-down the defaults, against 16 streams at once of
    0.58 s each (27.6 req/s at most): a p99 needs 500 requests a level, which the old first level of 1
    req/s could not complete in its 8 x --level-duration, and the search ended with no knee. It now
    starts where a level can be judged: 15.6 req/s with 5 s levels (it was 5.21 with 15 s levels and 8
    streams, whose first level alone took 96 s of the test's 7.2 min). 15.6 req/s keeps 7 of 16 streams
    idle, a p99 wait near 0 against 500 ms of slack; answers of 13 tokens, 40 ms apart, keep the client's
    work at 200 chunks a second there, not 800 (a run here: the first level's p99 230 ms, where 52 tokens
    10 ms apart gave 259). The search then settles between 15.6 req/s and the capacity."""
    server = fake_server("--ttft", "0.1", "--itl", "0.04", "--tokens", "13", "--max-concurrency", "16")
    code, output, _run_dir, result = capacity(tmp_path, server.url, "--slo", "ttft_p99_ms=600",
                                              "--level-duration", "5s", timeout=1200)
    assert code == 0 and result["undecided"] is None, output[-3000:]
    assert result["levels"][0]["level"] == 15.6  # 1.25 x 500 requests / 40 s
    assert 0.5 * 16 / 0.58 <= result["max_sustainable"] <= 16 / 0.58, output[-3000:]
    assert "Traceback" not in output
