"""Against the real embedded vLLM with admission control on (--max-num-queued-reqs 2, two sequences at
a time), started once for both tests: twelve users are mostly refused, and every refusal is
`rejected`, never a failure, counted exactly as the engine counts them (vllm:admission_rejections),
while the outcomes add up to the requests sent; and the capacity search names the limit `admission`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loadwatch.settings import records_beside
from tests.conftest import embedded_engine, scrape, total, wait_for
from tests.e2e.test_engine_run import headless

SLO_BROKEN = 3  # the exit code of a run that broke an SLO


@pytest.fixture(scope="module")
def engine():
    with embedded_engine("--max-num-queued-reqs", "2", "--max-num-seqs", "2") as info:
        yield info


def counters(url: str) -> dict[str, float]:
    samples = scrape(url + "/metrics")
    return {"rejected": total(samples, "vllm:admission_rejections_total"),
            "success": total(samples, "vllm:request_success_total")}


def test_refusals_are_rejected_apart_from_failures_and_match_the_engines_count(engine, tmp_path):
    before = counters(engine.url)
    results = tmp_path / "results.json"
    # 15 s of it gave 214 refusals here: at about one in ten, some twenty stream errors among them, where
    # the test needs one.
    run = headless(engine.url, results, "-u", "12", "-r", "12", "-t", "15s", "--max-tokens", "32",
                   "--slo", "rejected_ratio=0.01")
    output = run.stdout + run.stderr
    data = json.loads(results.read_text())
    # Every refusal is the server's choice, so nothing failed; their share breaks the SLO: exit 3.
    assert run.returncode == SLO_BROKEN, output
    assert data["rejected"] > 0 and data["failed"] == 0 and data["failures"] == {}, data
    assert set(data["rejections"]) == {"max_num_queued_reqs"} and sum(data["rejections"].values()) == data["rejected"]
    ended = data["completed"] + data["failed"] + data["rejected"]
    assert data["rejected_ratio"] == pytest.approx(data["rejected"] / ended)
    assert {v["name"]: v["passed"] for v in data["slo"]} == {"rejected_ratio": False}
    # Both of vLLM's ways of refusing were seen and taken as rejections: a 503, and (about one in ten, as
    # vLLM checks again when it adds the request to the engine) an error event in a stream already 200.
    # Locust's own error table names each under `chat (rejected)`.
    for answer in ("http_503", "stream_error"):
        assert f"chat (rejected): RequestFailed('{answer}: The engine is currently busy" in output, output
    # Each request sent has its record: the outcomes add up to them exactly.
    records = [json.loads(line) for line in records_beside(results).read_text().splitlines()]
    sent = [r for r in records if r["stage"] != "warmup"]
    assert len(sent) == data["completed"] + data["failed"] + data["rejected"] + data["cancelled"]
    assert sum(r["failure"] == "rejected" and r["rejection"] == "max_num_queued_reqs" for r in sent) == data["rejected"]
    # The engine's own counts, once its success counter has taken in the last requests.
    wait_for(lambda: counters(engine.url)["success"] - before["success"] >= data["completed"], 5,
             "the engine's success counter")
    after = counters(engine.url)
    assert after["success"] - before["success"] == data["completed"]
    assert after["rejected"] - before["rejected"] == data["rejected"], (before, after, data["rejections"])


def test_a_server_that_refuses_past_its_admission_cap_is_named_admission(engine, tmp_path):
    """Two batch slots and vLLM's admission cap at two unfinished requests (issue 61): two users are
    admitted whole, three are refused in part, and a refusal no rejected_ratio SLO allows breaks a
    level. The search names the limit `admission`, by reason, with the engine's own count, and each
    level's outcomes add up to the requests it sent. From 3 users: 3 broke, 2 held, and the knee is
    known (it ran 4, 2 and 3 from 4, on an engine of its own)."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--target", engine.url, "--max-num-seqs", "2",
         "--mode", "users", "--slo", "ttft_p90_ms=2000", "--start", "3", "--level-duration", "10s",
         "--warmup", "2s", "--cool-down", "2s", "--out", str(tmp_path / "runs"),
         "--", "--max-tokens", "32", "--ignore-eos"],
        capture_output=True, text=True, timeout=900, env=env)
    output = run.stdout + run.stderr
    print(output[-3000:])
    (run_dir,) = (tmp_path / "runs").iterdir()
    result = json.loads((run_dir / "capacity.json").read_text())
    assert result["limit"] == "admission" and run.returncode == 0, (result["limit"], result["evidence"])
    evidence = result["evidence"]
    assert evidence["rejections"]["max_num_queued_reqs"] == evidence["rejected"] > 0
    assert evidence["server_admission_rejections"] is not None  # the sidecar's count, beside the client's
    assert result["max_sustainable"] == 2 and result["rejected_ratio_at_max"] == 0.0, output[-3000:]
    broke = [lv for lv in result["levels"] if not lv["passed"]]
    assert broke and all(lv["verdict"].startswith("broke (the server refused") for lv in broke), broke
    for level in result["levels"]:
        figures = json.loads((run_dir / "levels" / f"{level['name']}.json").read_text())
        records = (run_dir / "levels" / f"{level['name']}.requests.jsonl").read_text().splitlines()
        sent = [r for r in map(json.loads, records) if r["stage"] != "warmup"]
        assert len(sent) == figures["completed"] + figures["failed"] + figures["rejected"] + figures["cancelled"]
    assert "The server's refusals by level:" in (run_dir / "report.md").read_text()
    assert "Traceback" not in output
