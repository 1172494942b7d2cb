"""`loadwatch export RUN --format br0.2`: a run as the Benchmark Report v0.2 of llm-d-benchmark and
inference-perf (issue 41), valid against the JSON Schemas llm-d-benchmark publishes (read in place
from `../shared/real/`; the structural checks below run without them)."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import yaml

from tests.conftest import REPO, headless_run

REAL = REPO.parent / "shared" / "real"
SCHEMAS = sorted(REAL.glob("llm-d-benchmark-br_v0_2*_json_schema.json")) if REAL.is_dir() else []


def export(run, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadwatch.cli", "export", str(run), "--format", "br0.2", *args],
                          capture_output=True, text=True, timeout=60)


def run_against_fake(folder, *options: str, server_options: tuple[str, ...] = ()):
    """A run with per-request records, against a fake server of known timing."""
    server = subprocess.Popen([sys.executable, str(REPO / "tests" / "sse_server.py"), "--port", "0", "--ttft", "0.02",
                               "--itl", "0.005", "--tokens", "8", *server_options], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline().split()[-1])
        run = headless_run(f"http://127.0.0.1:{port}", folder / "results.json", "-u", "4", "-r", "4",
                           "--num-requests", "120", "--record-itl", *options)
        assert run.returncode == 0, run.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(10)
    return folder


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return run_against_fake(tmp_path_factory.mktemp("run"))


def schema_errors(report: dict) -> list:
    errors = []
    for schema_path in SCHEMAS:
        validator = jsonschema.Draft202012Validator(json.loads(schema_path.read_text()),
                                                    format_checker=jsonschema.FormatChecker())
        errors += [f"{schema_path.name} {'/'.join(map(str, e.path))}: {e.message}"
                   for e in validator.iter_errors(report)]
    return errors


@pytest.mark.parametrize("with_records", [True, False])
def test_a_run_exports_as_a_benchmark_report_whose_figures_are_the_runs(finished_run, tmp_path, with_records):
    results = json.loads((finished_run / "results.json").read_text())
    run = finished_run
    if not with_records:  # the results alone, as a run without its records file
        run = tmp_path / "results.json"
        run.write_text(json.dumps({**results, "records": None}))
    done = export(run, "-o", str(tmp_path / "br.yaml"))
    assert done.returncode == 0 and "Benchmark Report v0.2 written to" in done.stdout, done.stdout + done.stderr
    report = yaml.safe_load((tmp_path / "br.yaml").read_text())
    assert report["version"] == "0.2" and report["run"]["uid"] == results["run_id"]
    aggregate = report["results"]["request_performance"]["aggregate"]
    assert aggregate["requests"]["total"] == results["completed"] + results["failed"] == 120
    assert aggregate["throughput"]["request_rate"]["mean"] == pytest.approx(results["request_throughput"])
    ttft = aggregate["latency"]["time_to_first_token"]
    assert ttft["units"] == "ms" and ttft["p50"] == pytest.approx(results["p50_ttft_ms"], rel=0.01)
    assert aggregate["requests"]["output_length"]["mean"] == pytest.approx(8)
    if with_records:  # exact, every percentile the schema names, ITL from the records' gaps
        assert {"p0p1", "p99p9", "min", "max"} <= set(ttft)
        assert aggregate["latency"]["inter_token_latency"]["p50"] == pytest.approx(results["p50_itl_ms"], rel=0.02)
        assert aggregate["latency"]["normalized_time_per_output_token"]["units"] == "ms/token"
    errors = schema_errors(report)
    assert not errors, errors[:5]
    if not SCHEMAS:
        pytest.skip(f"{REAL} is absent: the report's figures are checked, not its schema")


def test_a_folder_without_results_is_said_so_in_one_line(tmp_path):
    done = export(tmp_path)
    assert done.returncode == 1 and "error: cannot read" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_a_fleets_run_exports_a_report_per_replica_of_the_requests_it_served(tmp_path):
    # Replicas a and b behind a round-robin router, as their answers name them.
    run = run_against_fake(tmp_path, "--replica", "a", "--replica", "b", server_options=("--fingerprints", "a,b"))
    results = json.loads((run / "results.json").read_text())
    done = export(run)
    assert done.returncode == 0 and "of replica b's requests" in done.stdout, done.stdout + done.stderr
    whole = yaml.safe_load((run / "benchmark_report_v0.2.yaml").read_text())
    (health,) = whole["results"]["component_health"]
    assert health["failed_replicas"] == 0
    assert health["replica_health"] == [{"replica_id": "a", "healthy": True}, {"replica_id": "b", "healthy": True}]
    records = [json.loads(line) for line in (run / "results.requests.jsonl").read_text().splitlines()]
    totals = {}
    for name in ("a", "b"):
        report = yaml.safe_load((run / f"benchmark_report_v0.2.replica-{name}.yaml").read_text())
        assert report["run"]["eid"] == whole["run"]["eid"] and "replica " + name in report["run"]["description"]
        aggregate = report["results"]["request_performance"]["aggregate"]
        totals[name] = aggregate["requests"]["total"]
        served = [r for r in records if r["replica"] == name and r["failure"] is None and r["stage"] != "warmup"]
        assert totals[name] == len(served) == results["replicas"][name]["completed"]
        ttft = sorted(r["ttft_s"] * 1000 for r in served)
        assert aggregate["latency"]["time_to_first_token"]["min"] == pytest.approx(ttft[0])
        assert aggregate["latency"]["time_to_first_token"]["max"] == pytest.approx(ttft[-1])
        assert not schema_errors(report), schema_errors(report)[:5]
    assert totals["a"] + totals["b"] == results["completed"] == 120 and abs(totals["a"] - totals["b"]) <= 2
    assert not schema_errors(whole), schema_errors(whole)[:5]
