"""Embeddings and rerank against the server of known timing: each request timed from the send to
its whole answer, the texts and documents asked for sent, the server's prompt tokens counted, and
no TTFT, ITL or TPOT where no token streams."""

from __future__ import annotations

import json

import pytest

from tests.conftest import get, headless_run

pytestmark = pytest.mark.timing  # judged to 15 ms: run alone, not beside other tests


@pytest.mark.parametrize("endpoint, inputs, sent", [("embeddings", 3, 3), ("rerank", 4, 5)])
def test_a_pooling_endpoint_is_timed_whole_and_counts_the_servers_tokens(fake_server, tmp_path, endpoint, inputs,
                                                                         sent):
    server = fake_server("--ttft", "0.05")
    run = headless_run(server.url, tmp_path / "r.json", "-u", "2", "-r", "2", "--num-requests", "40",
                       "--endpoint", endpoint, "--inputs-per-request", str(inputs))
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    data = json.loads((tmp_path / "r.json").read_text())
    truth = server.stats()
    assert (data["completed"], data["failed"], truth["pooled"]) == (40, 0, 40)
    assert data["total_input_tokens"] == truth["pooled_tokens"] > 0 and data["total_output_tokens"] == 0
    assert data["median_e2el_ms"] == pytest.approx(truth["median_e2e_ms"], abs=15)
    assert data["input_throughput"] == pytest.approx(data["total_input_tokens"] / data["duration"])
    assert not any(key.endswith(("_ttft_ms", "_tpot_ms", "_itl_ms")) for key in data), sorted(data)
    seen = json.loads(get(server.url + "/stats/last-request"))
    body = seen["body"]
    assert seen["headers"]["accept"] == "application/json"  # one JSON answer, not a stream of events
    texts = body["input"] if endpoint == "embeddings" else [body["query"], *body["documents"]]
    assert len(texts) == sent and all(isinstance(t, str) and t for t in texts) and "max_tokens" not in body
    assert "Input token throughput (tok/s):" in output and "Time to First Token" not in output
