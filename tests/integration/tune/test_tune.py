"""`loadwatch tune` against a server of known slots that a --restart template starts with the flags
tune gives it (tests/fakes/restart.py: the fake's --max-concurrency is vLLM's --max-num-seqs, its
/metrics vLLM's): the loop's verdicts are exact here, and each run takes seconds. On the embedded
engine the loop is benchmarks/tune.py's: a step there costs six engine starts, over 14 minutes on a
busy 2-core machine, too long for CI's e2e tier."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from tests.conftest import REPO, free_port, wait_for

pytestmark = pytest.mark.needs("prometheus")
RESTART = REPO / "tests" / "fakes" / "restart.py"
# Answers of 0.34 s (30 tokens): with 2 slots a third user's request waits for one to end, and at least
# half of them wait 0.17 s or more (the two slots' ends split the 0.34 s between them): a first token
# at 0.22 s or later, over a TTFT p80 of 200 ms. A p80 needs 25 requests a level or trial run where a
# p90 needed 50 (3 s levels stretched to 11.5 s at 2 users for a p90). From 3 users, the baseline's
# search runs 3 (broke) and 2 (held), not 2, 4 and 3.
SEARCH = ("--mode", "users", "--start", "3", "--slo", "ttft_p80_ms=200", "--level-duration", "3s", "--warmup", "1s",
          "--cool-down", "1s", "--repeats", "2")


@pytest.fixture
def fake_target(tmp_path):
    port, pidfile = free_port(), tmp_path / "fake.pid"
    yield port, pidfile
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass


def tune(tmp_path, port: int, pidfile: Path, *options: str, restart_options: str = "",
         timeout: float = 600) -> tuple[int, str, Path | None]:
    restart = f"{sys.executable} {RESTART} --port {port} --pidfile {pidfile} {restart_options} -- {{vllm_args}}"
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-m", "loadwatch.cli", "tune", "--target", f"http://127.0.0.1:{port}",
                          "--restart", restart, "--vllm-arg=--max-num-seqs=2", *options,
                          "--out", str(tmp_path / "runs"), "--", "--max-tokens", "30"],
                         capture_output=True, text=True, timeout=timeout, env=env)
    runs = list((tmp_path / "runs").iterdir()) if (tmp_path / "runs").is_dir() else []
    return run.returncode, run.stdout + run.stderr, runs[0] if runs else None


@pytest.mark.needs("kubectl")  # its patch is rendered with the shipped manifests by `kubectl kustomize`
def test_batch_slots_are_named_more_seqs_adopted_and_the_capacity_after_is_higher(tmp_path, fake_target):
    # One step: the budget is far from binding, so a slow machine only takes longer.
    code, output, run_dir = tune(tmp_path, *fake_target, *SEARCH, "--max-steps", "1", "--budget", "15m")
    assert code == 0 and run_dir is not None, output[-3000:]
    doc = json.loads((run_dir / "tune.json").read_text())
    assert doc["baseline"]["limit"] == "batch_slots" and doc["baseline"]["capacity"]["max_sustainable"] == 2
    assert doc["baseline"]["capacity"]["unit"] == "users" and doc["baseline"]["vllm_args"] == ["--max-num-seqs=2"]
    step = doc["steps"][0]
    assert step["change"] == {"flag": "--max-num-seqs", "from": "2", "to": "8"} and step["verdict"] == "adopted"
    assert step["gain"]["metric"] == "request_goodput" and step["gain"]["ci_low"] > 0, step
    assert step["slo_change"]["metric"] == "ttft_p80_ms" and step["slo_change"]["change_pct"] < 0, step
    assert step["evidence"]["max_num_seqs"] == 2 and step["reason"]
    assert step["capacity_after"]["max_sustainable"] > 2 and step["limit_after"], step
    assert doc["final"]["vllm_args"] == ["--max-num-seqs=8"] and "--max-num-seqs=8" in doc["final"]["command_line"]
    assert doc["final"]["capacity"] == step["capacity_after"] and doc["stopped"] == "--max-steps (1) reached"
    report = (run_dir / "report.md").read_text()
    assert "## Tuning" in report and "| 1 | batch_slots | --max-num-seqs 2 -> 8 |" in report
    assert (run_dir / "report.html").is_file() and "step 1: batch_slots: trying --max-num-seqs 2 -> 8" in output
    assert (run_dir / "tuned.env").read_text() == "VLLM_EXTRA_ARGS=--max-num-seqs=8\n"
    assert "Traceback" not in output
    the_patch_applies_to_the_shipped_deployment(tmp_path, run_dir)


def the_patch_applies_to_the_shipped_deployment(tmp_path: Path, run_dir: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "tuned-patch.yaml").write_text((run_dir / "tuned-patch.yaml").read_text())
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(REPO / "deploy" / "kubernetes", overlay)],
        "patches": [{"path": "tuned-patch.yaml", "target": {"kind": "Deployment", "name": "vllm"}}]}))
    built = subprocess.run(["kubectl", "kustomize", str(overlay), "--load-restrictor", "LoadRestrictionsNone"],
                           capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    (deployment,) = [d for d in yaml.safe_load_all(built.stdout)
                     if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "vllm"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "--max-num-seqs=8"


def test_a_flag_the_server_refuses_is_reported_in_its_words_and_nothing_else_is_lost(tmp_path, fake_target):
    code, output, run_dir = tune(tmp_path, *fake_target, *SEARCH, "--budget", "15m",  # far from binding
                                 restart_options="--refuse=--max-num-seqs=8")
    assert code == 0 and run_dir is not None, output[-3000:]
    doc = json.loads((run_dir / "tune.json").read_text())
    (step,) = doc["steps"]
    assert step["verdict"] == "refused" and "unrecognized arguments: --max-num-seqs=8" in step["refused"]
    assert doc["baseline"]["limit"] == "batch_slots" and doc["final"]["vllm_args"] == ["--max-num-seqs=2"]
    assert "no lever of step 1 raised request_goodput beyond doubt" in doc["stopped"]
    assert "refused by the server: vllm serve: error: unrecognized arguments: --max-num-seqs=8" in output
    assert "Traceback" not in output


def test_a_budget_too_short_for_the_baseline_ends_incomplete_with_the_file_written(tmp_path, fake_target):
    code, output, run_dir = tune(tmp_path, *fake_target, *SEARCH, "--budget", "10s")
    assert code == 1 and run_dir is not None, output
    doc = json.loads((run_dir / "tune.json").read_text())
    assert doc["baseline"] is None and doc["steps"] == [] and doc["final"] is None
    assert "the budget (10 s) ran out before the baseline's capacity was known" in output
    assert "Traceback" not in output


def test_a_target_without_a_restart_template_is_bad_input(tmp_path):
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    for restart in ([], ["--restart", "ssh gpu1 ./serve.sh"]):
        run = subprocess.run([sys.executable, "-m", "loadwatch.cli", "tune", "--target", "http://127.0.0.1:1",
                              "--slo", "ttft_p90_ms=200", *restart, "--out", str(tmp_path / "runs")],
                             capture_output=True, text=True, timeout=60, env=env)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "give --restart 'COMMAND {vllm_args}'" in run.stdout and "Traceback" not in run.stderr
    assert not (tmp_path / "runs").exists()


def test_sigterm_in_a_trial_keeps_the_baseline_writes_the_summary_and_exits_130(tmp_path, fake_target):
    port, pidfile = fake_target
    restart = f"{sys.executable} {RESTART} --port {port} --pidfile {pidfile} -- {{vllm_args}}"
    run = subprocess.Popen(
        [sys.executable, "-m", "loadwatch.cli", "tune", "--target", f"http://127.0.0.1:{port}", "--restart", restart,
         "--vllm-arg=--max-num-seqs=2", *SEARCH, "--budget", "10m", "--out", str(tmp_path / "runs"),
         "--", "--max-tokens", "30"],
        env={**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: any((tmp_path / "runs").glob("*/step-1/trial/*/r1/locust.log")), 300, "the first trial run")
        children = psutil.Process(run.pid).children(recursive=True)
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 130, output[-3000:]
    (doc_path,) = (tmp_path / "runs").glob("*/tune.json")
    doc = json.loads(doc_path.read_text())
    assert doc["baseline"]["limit"] == "batch_slots" and doc["steps"] == []  # the unfinished step left out
    assert doc["stopped"] == "interrupted; the finished steps are kept" and doc["final"]["vllm_args"] == [
        "--max-num-seqs=2"]
    time.sleep(0.5)  # Locust and the stack's servers stopped with it, none left behind
    left = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(p.cmdline()) for p in left]
    assert "Traceback" not in output
