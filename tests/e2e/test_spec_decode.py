"""An engine with ngram speculative decoding: the sidecar's acceptance figures move."""

from __future__ import annotations

import json

import pytest

from loadwatch.engine import process
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_engine, ensure_model
from tests.e2e.exporter_watch import ExporterWatch
from tests.e2e.test_engine_run import headless

NGRAM = json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1})


@pytest.fixture(scope="module")
def spec_engine():
    settings = EngineSettings()
    ensure_engine(settings)
    info = process.start(settings, ensure_model(settings), extra=["--speculative-config", NGRAM])
    yield info
    process.stop(settings)


def test_ngram_speculation_at_temperature_0_has_acceptance(spec_engine, tmp_path):
    watch = ExporterWatch(spec_engine.url)
    try:
        run = headless(spec_engine.url, tmp_path / "r.json", "-u", "4", "-r", "4", "-t", "15s",
                       "--temperature", "0", "--max-tokens", "64")
        data = json.loads((tmp_path / "r.json").read_text())
        assert data["completed"] > 10 and set(data["failures"]) <= {"empty_completion"}, run.stdout + run.stderr
    finally:
        watch.close()
    assert watch.peaks["loadwatch_engine_spec_decode_acceptance_ratio"] > 0
    assert watch.peaks["loadwatch_engine_spec_decode_mean_acceptance_length"] > 1
