"""Open loop: 600 requests whose arrivals, as the server saw them, follow the asked process."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from itertools import pairwise

import pytest

from loadwatch.metrics.records import read_records
from tests.conftest import get, locust_command

pytestmark = pytest.mark.timing  # judged to the millisecond: run alone, not beside other tests


@pytest.mark.parametrize(("burstiness", "cv"), [(1.0, 1.0), (4.0, 0.5)])
def test_arrivals_have_the_asked_rate_and_variation(fake_server, tmp_path, burstiness, cv):
    # Responses (50 ms + 10 x 10 ms) outlast the mean gap of 25 ms: a closed loop could not keep up.
    # Gaps of 25 ms, not 10: a busy machine delays each send by a few ms, which adds 2 jitter^2 / gap^2
    # to the measured cv^2 (at 10 ms gaps it read 0.75 for 0.5).
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "10")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "1", "-r", "1", "--metrics-port", "0",
                       "--request-rate", "40", "--burstiness", str(burstiness), "--num-requests", "600",
                       "--seed", "3", "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    times = json.loads(get(server.url + "/stats/arrivals"))
    assert len(times) == 600
    gaps = [b - a for a, b in pairwise(times)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.025, rel=0.08)
    assert statistics.pstdev(gaps) / mean == pytest.approx(cv, abs=0.15)
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["completed"] == 600
    # The results state the schedule asked, drawn and kept: the server's own clock agrees with the last.
    arrivals = results["arrivals"]
    assert arrivals["requested_rate"] == 40 and not arrivals["fell_short"], arrivals
    assert arrivals["achieved_rate"] == pytest.approx(599 / (times[-1] - times[0]), rel=0.02)
    assert arrivals["lag_ms"]["median"] < 5


def test_dropped_arrivals_use_up_no_request_of_num_requests(fake_server, tmp_path):
    # 50 arrivals/s against one slot of ~100 ms requests: most arrivals are dropped.
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "5")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "1", "-r", "1", "--metrics-port", "0",
                       "--request-rate", "50", "--max-concurrency", "1", "--num-requests", "30",
                       "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert server.stats()["arrivals"] == 30
    assert json.loads((tmp_path / "r.json").read_text())["completed"] == 30


def test_the_run_time_ends_an_open_loop_without_waiting_out_the_stop_timeout(fake_server, tmp_path):
    """Users between arrivals are not busy: at -t they stop, once the requests in flight (2 s each
    here) have finished, not after --stop-timeout; the last ones are still measured."""
    server = fake_server("--ttft", "1.0", "--itl", "0.1", "--tokens", "10")
    started = time.monotonic()
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "4", "-r", "4", "-t", "3s", "--stop-timeout", "30",
                       "--metrics-port", "0", "--request-rate", "4", "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=120,
    )
    took = time.monotonic() - started
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Not all users finished" not in run.stderr
    assert took < 15, f"{took:.0f} s: the stop waited out the timeout"
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["failed"] == 0 and results["completed"] == server.stats()["arrivals"]


def test_a_trace_is_replayed_at_its_own_times_each_entry_once_across_workers(fake_server, tmp_path):
    server = fake_server("--ttft", "0.01", "--itl", "0.001", "--tokens", "2")
    trace = tmp_path / "trace.jsonl"
    # Twelve entries 250 ms apart, each of its own length (so the server can tell them apart).
    trace.write_text("".join(json.dumps({"timestamp": 250 * i, "input_length": 16 + 8 * i, "output_length": 2,
                                         "hash_ids": [0, 1 + i]}) + "\n" for i in range(12)))
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "--processes", "2", "--metrics-port",
                       "0", "--dataset", "trace", "--dataset-path", str(trace), "--speedup", "2",
                       "--trace-block-tokens", "8", "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    records = list(read_records(tmp_path / "r.requests.jsonl"))
    assert len(records) == 12 and len({r["worker"] for r in records}) == 2
    assert len({r["prompt_tokens"] for r in records}) == 12  # every entry once, none twice
    arrivals = sorted(json.loads(get(server.url + "/stats/arrivals")))
    offsets = [a - arrivals[0] for a in arrivals]
    assert max(abs(offset - 0.125 * i) for i, offset in enumerate(offsets)) < 0.05, offsets
