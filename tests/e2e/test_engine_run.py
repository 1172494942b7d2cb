"""Against the real embedded vLLM: what the client counted is what the engine served."""

from __future__ import annotations

import json
import subprocess

import pytest

from loadwatch.engine import process
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_engine, ensure_model
from tests.conftest import locust_command, scrape, total

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def engine():
    settings = EngineSettings()
    ensure_engine(settings)
    info = process.start(settings, ensure_model(settings))
    yield info
    process.stop(settings)


def engine_figures(url: str) -> dict[str, float]:
    samples = scrape(url + "/metrics")
    return {
        "success": total(samples, "vllm:request_success_total"),
        "ttft_sum": total(samples, "vllm:time_to_first_token_seconds_sum"),
        "ttft_count": total(samples, "vllm:time_to_first_token_seconds_count"),
        "generation": total(samples, "vllm:generation_tokens_total"),
    }


def test_distributed_run_counts_what_the_engine_served(engine, tmp_path):
    before = engine_figures(engine.url)
    results = tmp_path / "results.json"
    run = subprocess.run(
        locust_command("-H", engine.url, "--headless", "-u", "8", "-r", "8", "-t", "20s", "--processes", "2",
                       "--metrics-port", "0", "--stop-timeout", "60", "--max-tokens", "64",
                       "--results-json", str(results)),
        capture_output=True, text=True, timeout=180,
    )
    after = engine_figures(engine.url)
    data = json.loads(results.read_text())
    assert data["completed"] > 20, run.stdout + run.stderr
    finished = data["completed"] + data["failed"]
    # Every request the engine finished was counted once by the client, and no other.
    assert finished == after["success"] - before["success"]
    assert set(data["failures"]) <= {"empty_completion"}, data["failures"]
    # The engine also counts the tokens of empty completions (an EOS alone), which failed here.
    untold = after["generation"] - before["generation"] - data["total_output_tokens"]
    assert 0 <= untold <= data["failed"] * 64
    engine_ttft_ms = 1000 * (after["ttft_sum"] - before["ttft_sum"]) / (after["ttft_count"] - before["ttft_count"])
    assert data["mean_ttft_ms"] >= engine_ttft_ms
    assert list(data["scenarios"]) == ["chat (tiny)"]
