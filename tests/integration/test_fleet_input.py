"""A fleet asked for wrongly gets one line and exit code 2, before anything is started (issue 48)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import closed_port

CLI = [sys.executable, "-m", "loadwatch.cli"]


def loadwatch(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    return subprocess.run([*CLI, "run", "--out", str(tmp_path / "runs"), *args], capture_output=True, text=True,
                          timeout=180, env=env)


@pytest.mark.parametrize(("args", "said"), [
    (["--replicas", "0"], "--replicas: Input should be greater than or equal to 1"),
    (["--replicas", "2", "--router", "envoy"], "loadwatch does not know the router 'envoy'; it knows smg, vllm-router"),
    (["--replicas", "2", "--replica-arg", "c=--max-num-seqs=1"], "--replica-arg names c, not one of the replicas"),
    (["--replicas", "2", "--target", "http://127.0.0.1:1"], "--replicas starts a fleet on this machine"),
    (["--replica", "a=http://127.0.0.1:1"], "give --target, its router's URL"),
    (["--router", "vllm-router"], "give --replicas N to start one here, or --target ROUTER for your own"),
])
def test_a_fleet_asked_for_wrongly_is_refused_in_one_line(tmp_path, args, said):
    refused = loadwatch(tmp_path, *args)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert said in refused.stdout and "Traceback" not in refused.stdout + refused.stderr, refused.stdout
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("stack.json"))


def test_a_replica_that_does_not_answer_is_named(tmp_path, fake_server):
    router, dead = fake_server("--vllm-metrics"), f"http://127.0.0.1:{closed_port()}"
    refused = loadwatch(tmp_path, "--target", router.url, "--replica", "a=" + router.url, "--replica", "b=" + dead)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"replica b at {dead} does not answer" in refused.stdout, refused.stdout
    assert "Traceback" not in refused.stdout + refused.stderr


@pytest.mark.parametrize("kind", ["vllm-router", "smg"])
def test_a_policy_the_router_does_not_have_is_refused_in_its_own_words_before_any_replica_starts(tmp_path, kind):
    refused = loadwatch(tmp_path, "--replicas", "2", "--router", kind, "--router-policy", "fastest")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{kind} refused it:" in refused.stdout and "invalid choice: 'fastest'" in refused.stdout
    assert "Starting 2 vLLM replicas" not in refused.stdout


def test_tune_and_experiment_take_a_fleet_and_refuse_one_asked_for_wrongly(tmp_path):
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=180, env=env)

    tuned = cli("tune", "--slo", "ttft_p99_ms=500", "--replicas", "0", "--out", str(tmp_path / "runs"))
    assert tuned.returncode == 2 and "--replicas: Input should be greater than or equal to 1" in tuned.stdout
    experiment = tmp_path / "own.yaml"
    experiment.write_text("name: own\nrepeats: 1\nbaseline: mine\narms:\n  mine:\n    target: http://127.0.0.1:1\n"
                          "  here:\n    vllm_args: []\nworkloads:\n  random:\n    dataset: random\n"
                          "load:\n  users: 1\n  duration: 10s\n")
    refused = cli("experiment", str(experiment), "--replicas", "2", "--out", str(tmp_path / "runs"))
    assert refused.returncode == 2 and "the arms with a target are servers of your own" in refused.stdout, \
        refused.stdout + refused.stderr
    # An experiment's fleet is embedded: it has no option for one of yours (an arm with a target is that).
    named = cli("experiment", str(experiment), "--scale", "kubectl scale --replicas={replicas}", "--check")
    assert named.returncode == 2 and "unrecognized arguments: --scale" in named.stderr, named.stderr
    planned = cli("experiment", "prefix-caching", "--replicas", "2", "--check")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    for done in (tuned, refused, named, planned):
        assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "runs").exists()
