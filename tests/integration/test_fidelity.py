"""Measurement fidelity: 64 concurrent streams over two worker processes on this small machine."""

from __future__ import annotations

import json
import statistics
import subprocess

import pytest

from loadwatch.metrics.sketch import ACCURACY
from tests.conftest import locust_command

pytestmark = pytest.mark.timing  # judged to the millisecond: run alone, not beside other tests


def test_median_ttft_within_5ms_and_tpot_within_1ms_of_truth(fake_server, tmp_path):
    server = fake_server("--ttft", "0.1", "--itl", "0.02", "--tokens", "20")
    results = tmp_path / "results.json"
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "64", "-r", "64", "-t", "15s", "--processes", "2",
                       "--metrics-port", "0", "--stop-timeout", "5", "--results-json", str(results)),
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert_faithful(results, server, at_least=1000)


def assert_faithful(results, server, at_least: int) -> None:
    """Every request the server served was measured, with median TTFT within 5 ms and median TPOT
    within 1 ms of what the server really did, on this 2-core machine with a core kept busy by
    another process. Quiet, the TTFT error is about 1 ms, as `make benchmark` measures; with the busy
    core it was 2.1 to 3.3 ms in five fresh-clone runs, the client's processes waiting for the CPU
    (`vllm bench serve` is 45 ms off at 256 streams). The measurement is judged on every request's
    own record (exact); the results' sketch medians are within their stated accuracy of those."""
    measured = json.loads(results.read_text())
    truth = server.stats()
    assert measured["completed"] == truth["outcomes"]["completed"] > at_least
    records = [json.loads(line) for line in results.with_name("results.requests.jsonl").read_text().splitlines()]
    good = [r for r in records if r["failure"] is None and r["stage"] != "warmup"]
    exact_ttft = 1000 * statistics.median(r["ttft_s"] for r in good)
    exact_tpot = 1000 * statistics.median(r["tpot_s"] for r in good)
    assert measured["median_ttft_ms"] == pytest.approx(exact_ttft, rel=ACCURACY)
    ttft_error = exact_ttft - truth["median_ttft_ms"]
    tpot_error = exact_tpot - truth["median_tpot_ms"]
    print(f"median TTFT error {ttft_error:+.3f} ms, median TPOT error {tpot_error:+.4f} ms")
    assert abs(ttft_error) <= 5.0
    assert abs(tpot_error) <= 1.0
