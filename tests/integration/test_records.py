"""A distributed run keeps one record per request on disk as requests finish, each named by the
X-Request-Id the server saw; results are checkpointed while it runs; the report reads the records
back into exact figures."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from loadwatch.metrics.sketch import ACCURACY
from tests.conftest import get, locust_command


def test_one_record_per_request_named_as_the_server_saw_it_and_checkpoints_during_the_run(fake_server, tmp_path):
    server = fake_server("--ttft", "0.02", "--itl", "0.005", "--tokens", "6", "--fault", "http_500=9")
    results = tmp_path / "results.json"
    records, partial = tmp_path / "results.requests.jsonl", tmp_path / "results.partial.json"
    locust = subprocess.Popen(
        locust_command("-H", server.url, "--headless", "-u", "8", "-r", "8", "-t", "8s", "--processes", "2",
                       "--metrics-port", "0", "--stop-timeout", "5", "--warmup-requests", "5", "--record-itl",
                       "--checkpoint-interval", "2", "--results-json", str(results)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen_during: list[tuple[int, dict]] = []
    while locust.poll() is None:
        time.sleep(0.5)
        if partial.exists() and records.exists():
            seen_during.append((len(records.read_text().splitlines()), json.loads(partial.read_text())))
    output = locust.communicate()[0]
    assert locust.returncode == 1, output  # the http_500s
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    ids = [r["id"] for r in lines]
    sent = json.loads(get(server.url + "/stats/request-ids"))
    assert len(ids) == len(set(ids)) == len(sent) and set(ids) == set(sent)  # exactly one record per request
    data = json.loads(results.read_text())
    measured = [r for r in lines if r["stage"] != "warmup"]
    assert len(lines) - len(measured) == data["warmup_requests"] == 5
    assert len(measured) == data["completed"] + data["failed"]
    assert sum(r["failure"] == "http_500" for r in measured) == data["failures"]["http_500"]
    assert {r["worker"] for r in lines} and "local" not in {r["worker"] for r in lines}  # two workers measured
    good = [r for r in measured if r["failure"] is None]
    assert all(len(r["itl_s"]) == 5 and r["output_tokens"] == 6 for r in good)
    # The records were written while the run went on, beside a results checkpoint; the end removed it.
    assert seen_during and seen_during[-1][0] > 0 and seen_during[-1][1]["partial"] is True
    assert not partial.exists() and data["partial"] is False
    assert data["median_ttft_ms"] == pytest.approx(np.median([r["ttft_s"] * 1000 for r in good]), rel=ACCURACY)

    report = subprocess.run([sys.executable, "-m", "loadwatch.cli", "report", str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stdout + report.stderr
    client = json.loads((tmp_path / "report.json").read_text())
    assert client["client_source"].startswith(f"exact, from the {len(measured)} records")
    assert client["client"]["median_ttft_ms"] == pytest.approx(np.median([r["ttft_s"] * 1000 for r in good]))
