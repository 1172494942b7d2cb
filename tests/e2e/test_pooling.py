"""Embeddings and rerank on the embedded engine, served as a pooling model (engine/serving.py): the
client's requests and prompt tokens are what vLLM counted, request by request."""

from __future__ import annotations

import json

import pytest

from loadwatch.engine.serving import POOLING_ARGS
from tests.conftest import embedded_engine, scrape, total, wait_for
from tests.e2e.test_engine_run import assert_endpoint_refused, headless


@pytest.fixture(scope="module")
def pooling_engine():
    with embedded_engine(*POOLING_ARGS) as info:
        yield info


def counted(url: str) -> dict[str, float]:
    samples = scrape(url + "/metrics")
    return {"requests": total(samples, "vllm:request_success_total"),
            "prompt_tokens": total(samples, "vllm:prompt_tokens_total")}


# vLLM runs each text of an embeddings request as a request of its own, and a rerank by its
# bi-encoder as the query's and each document's: 3 and 1 + 3 engine requests per HTTP request.
@pytest.mark.parametrize("endpoint, engine_requests_each", [("embeddings", 3), ("rerank", 4)])
def test_pooling_requests_and_tokens_are_what_the_engine_counted(pooling_engine, tmp_path, endpoint,
                                                                 engine_requests_each):
    before = counted(pooling_engine.url)
    results = tmp_path / "results.json"
    run = headless(pooling_engine.url, results, "-u", "2", "-r", "2", "--num-requests", "30",
                   "--endpoint", endpoint, "--inputs-per-request", "3", "--dataset", "sharegpt")
    output = run.stdout + run.stderr
    assert run.returncode == 0 and "Traceback" not in output, output[-3000:]
    data = json.loads(results.read_text())
    assert (data["completed"], data["failed"]) == (30, 0), output[-3000:]
    wait_for(lambda: counted(pooling_engine.url)["requests"] - before["requests"] >= 30 * engine_requests_each, 5,
             "the engine's success counter to take in the last requests")
    after = counted(pooling_engine.url)
    assert after["requests"] - before["requests"] == 30 * engine_requests_each
    assert data["total_input_tokens"] == after["prompt_tokens"] - before["prompt_tokens"] > 0
    assert data["median_e2el_ms"] > 0 and "median_ttft_ms" not in data and data["total_output_tokens"] == 0


def test_a_generation_endpoint_on_an_embedding_model_is_one_line_and_no_run(pooling_engine, tmp_path):
    assert_endpoint_refused(pooling_engine.url, tmp_path, "chat", "/v1/chat/completions")
