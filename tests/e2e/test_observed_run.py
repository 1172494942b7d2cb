"""One real `loadwatch run` on the embedded engine, saturated and speculating, in two load stages:
its report has the engine's side, and every dashboard query finds data in its Prometheus. The run
is given a sentinel API key (the engine asks for it) and Grafana token: they reach the servers'
Authorization headers and nothing else, no command line, file of the run, log or series."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.small import SMALL_KV
from loadwatch.stack.readback import prometheus_on
from tests.conftest import REPO
from tests.dashboard_queries import VALUES, queries, variable_selectors
from tests.e2e.test_small_kv_cache import short_rules
from tests.fakes.grafana import FakeGrafana

NO_GPU_HERE = "DCGM_FI_DEV_"  # NVIDIA's DCGM exporter: no GPU on this machine, so no such series
KEY, TOKEN = "sk-sentinel-e2e-71c0", "glsa_sentinel_e2e_9b2d"
# Speculation's figures move on the engine's ngram proposer: the report and the dashboards read them
# through the sidecar.
NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1})
SEEN: dict[str, str] = {}  # what the run showed: its output and every command line of its processes


def command_lines(pid: int) -> set[str]:
    try:
        parent = psutil.Process(pid)
        return {" ".join(p.cmdline()) for p in [parent, *parent.children(recursive=True)]}
    except psutil.Error:
        return set()


@pytest.fixture(scope="module")
def grafana():
    server = FakeGrafana(token=TOKEN)
    yield server
    server.close()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, grafana):
    tmp = tmp_path_factory.mktemp("observed")
    env = {**os.environ, "OPENAI_API_KEY": KEY, "GRAFANA_TOKEN": TOKEN, "LOADWATCH_STACK_HOME": str(tmp / "home"),
           "LOADWATCH_STACK_RULES_DIR": str(short_rules(tmp)), "LOADWATCH_STACK_SCRAPE_INTERVAL": "2s",
           "LOADWATCH_STACK_EVALUATION_INTERVAL": "1s", "LOADWATCH_STACK_EXPORTER_WINDOW": "10"}
    run = subprocess.Popen(
        [sys.executable, "-m", "loadwatch.cli", "run", "--out", str(tmp / "runs"), "-u", "12", "-r", "12", "-t", "60s",
         "--metrics-port", "0", "--slo", "ttft_p99_ms=60000", "--slo", "failure_ratio=1",  # the SLO tiles' data
         "--locustfile", str(REPO / "tests" / "e2e" / "locustfiles" / "observed_mix.py"),
         "--grafana-url", grafana.url, *(f"--vllm-arg={a}" for a in [*SMALL_KV, "--speculative-config", NGRAM]),
         "--", "--temperature", "0", "--max-tokens", "200", "--ignore-eos",
         "--shape", "step", "--step-size", "6", "--stage-duration", "25"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    lines: set[str] = set()
    deadline = time.monotonic() + 400
    while run.poll() is None and time.monotonic() < deadline:
        lines |= command_lines(run.pid)
        time.sleep(1)
    output, _ = run.communicate(timeout=max(1.0, deadline - time.monotonic()))
    SEEN.update(output=output, command_lines="\n".join(sorted(lines)))
    (path,) = (tmp / "runs").iterdir()
    assert (path / "results.json").exists(), output
    print(output[-3000:])
    return path


def test_the_secrets_reach_the_authorization_headers_and_nothing_else(run_dir, grafana):
    assert "vllm.entrypoints.openai.api_server" in SEEN["command_lines"]  # the sampling saw the engine
    assert "locust" in SEEN["command_lines"]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["completed"] > 20 and "http_401" not in results["failures"]  # the engine asked for the key
    assert grafana.posted and set(grafana.auth) == {f"Bearer {TOKEN}"}
    engine_log = EngineSettings().state_dir / "vllm.log"
    files = [p for p in run_dir.rglob("*") if p.is_file() and "prometheus-data" not in p.parts]
    for secret in (KEY, TOKEN):
        assert secret not in SEEN["output"] and secret not in SEEN["command_lines"]
        for path in [*files, *([engine_log] if engine_log.exists() else [])]:
            assert secret.encode() not in path.read_bytes(), path
    with prometheus_on(run_dir / "prometheus-data", run_dir / "logs") as api:
        series = api.query('{__name__=~"loadwatch_.+|vllm:.+"}', results["ended_at"])
    assert series
    for item in series:
        assert not any(KEY in value or TOKEN in value for value in item["metric"].values())


def test_the_report_puts_engine_figures_beside_the_client_summary(run_dir):
    report = json.loads((run_dir / "report.json").read_text())
    client, engine = report["client"], report["engine"]
    assert client["completed"] > 20 and client["failures"].get("http_400", 0) > 0
    assert client["total_tool_calls"] > 0 and client["cached_prompt_tokens_ratio"] > 0
    assert engine["kv_cache_usage_peak"] > 0.9 and engine["requests_waiting_peak"] >= 1
    assert isinstance(engine["preemptions"], float) and engine["prefix_cache_hit_ratio"] is not None
    assert engine["spec_decode_acceptance_ratio"] > 0 and engine["spec_decode_mean_acceptance_length"] > 1
    assert 0 < engine["engine_mean_ttft_ms"] < client["mean_ttft_ms"]
    assert 0 < engine["queue_time_share"] < 1
    assert [s["name"] for s in report["stages"]] == ["step-1", "step-2"]
    assert (run_dir / report["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (run_dir / "report.md").read_text()
    split = {p["part"]: p for p in report["ttft_split"]["parts"]}  # each request joined with the engine's account
    assert report["ttft_split"]["joined"] > 20 and split["engine_prefill_s"]["p99_ms"] > 0
    for heading in ("## Client", "## Engine", "## Where the time goes", "## Request by request", "## Stages",
                    "![client TTFT p99"):
        assert heading in text


def test_every_dashboard_query_returns_data_from_the_runs_prometheus(run_dir):
    results = json.loads((run_dir / "results.json").read_text())
    start, end = results["started_at"], results["ended_at"]
    empty = []
    with prometheus_on(run_dir / "prometheus-data", run_dir / "logs") as api:
        assert VALUES["$__rate_interval"] == "30s"
        for where, expr in [*queries(fleet=False), *variable_selectors(fleet=False)]:
            if NO_GPU_HERE in expr:
                continue
            result = api.query_range(expr, start, end + 10, 2)
            values = [v for series in result for _, v in series["values"] if v not in ("NaN", "+Inf", "-Inf")]
            if not values:
                empty.append(f"{where}: {expr}")
        # The report again, read back from the saved data, agrees with the one written during the run.
        during = json.loads((run_dir / "report.json").read_text())["engine"]
    assert not empty, "queries without data:\n" + "\n".join(empty)
    readback = subprocess.run([sys.executable, "-m", "loadwatch.cli", "report", str(run_dir)],
                              capture_output=True, text=True, timeout=180)
    assert readback.returncode == 0, readback.stdout + readback.stderr
    after = json.loads((run_dir / "report.json").read_text())["engine"]
    # increase() extrapolates from the samples it has: the report written during the run had fewer after the end.
    assert after["preemptions"] == pytest.approx(during["preemptions"], rel=0.05)
    assert after["kv_cache_usage_peak"] == pytest.approx(during["kv_cache_usage_peak"])
    assert after["engine_mean_ttft_ms"] == pytest.approx(during["engine_mean_ttft_ms"], rel=0.05)


def test_each_request_is_joined_with_the_engines_account_and_the_p99_band_is_attributed(run_dir):
    done = [r for r in map(json.loads, (run_dir / "results.requests.jsonl").read_text().splitlines())
            if r["stage"] != "warmup" and r["failure"] is None]
    joined = [r for r in done if r.get("engine_prefill_s") is not None]
    assert len(done) > 20 and len(joined) >= 0.95 * len(done)
    # Both are monotonic intervals of one request, the engine's inside the client's (README: the clock tolerance).
    assert all(r["engine_queue_s"] + r["engine_prefill_s"] <= r["ttft_s"] + 0.001 for r in joined)
    assert any(r["spec_acceptance_length"] for r in joined)  # the ngram proposer's, per request
    report = json.loads((run_dir / "report.json").read_text())
    (p99,) = [b for b in report["ttft_split"]["bands"] if b["band"] == "p99"]
    assert p99["requests"] >= 1 and p99["dominant"] in p99["parts_ms"] and 0 < p99["dominant_share"] <= 1
    assert p99["engine"]["kv_cache"] is not None and p99["engine"]["running"] >= 1
    assert report["engine"]["engine_ttft_exact"]  # the engine's p99 TTFT from the requests, not from buckets
    assert "| p99 |" in (run_dir / "report.md").read_text()


def test_an_exemplar_in_the_runs_prometheus_leads_to_a_request_that_explain_tells_the_story_of(run_dir):
    results = json.loads((run_dir / "results.json").read_text())
    records = {r["id"]: r for r in map(json.loads, (run_dir / "results.requests.jsonl").read_text().splitlines())}
    with prometheus_on(run_dir / "prometheus-data", run_dir / "logs") as api:
        found = api.exemplars("loadwatch_client_time_to_first_token_seconds_bucket", results["started_at"],
                              results["ended_at"] + 30)
    exemplars = [e for series in found for e in series["exemplars"]]
    assert exemplars
    for exemplar in exemplars:
        record = records[exemplar["labels"]["request_id"]]
        assert float(exemplar["value"]) == pytest.approx(record["ttft_s"], abs=1e-6)
    slowest = max(exemplars, key=lambda e: float(e["value"]))
    request_id = slowest["labels"]["request_id"]
    told = subprocess.run([sys.executable, "-m", "loadwatch.cli", "explain", str(run_dir), request_id[:12]],
                          capture_output=True, text=True, timeout=120)
    assert told.returncode == 0, told.stdout + told.stderr
    assert f"request {request_id}" in told.stdout and "first token" in told.stdout
    assert "engine while it ran:" in told.stdout and "why: " in told.stdout
