"""The engine's own account of a request rides on vLLM's final usage chunk."""

import json

import pytest

from loadwatch.client.chunks import parse_chunk
from loadwatch.metrics.records import as_record
from loadwatch.metrics.timing import RawTiming, request_metrics

# vLLM 0.32 with --enable-per-request-metrics, as the embedded engine sent it (ids from X-Request-Id).
USAGE_CHUNK = (
    '{"id":"chatcmpl-lw-test-123","object":"chat.completion.chunk","created":1795500000,"model":"tiny",'
    '"choices":[],"usage":{"prompt_tokens":12,"total_tokens":20,"completion_tokens":8},'
    '"metrics":{"time_to_first_token_ms":11.8,"generation_time_ms":50.3,"queue_time_ms":0.04,'
    '"mean_itl_ms":7.2,"tokens_per_second":128.7,"speculative_decoding":{"mean_acceptance_length":2.5,'
    '"draft_acceptance_rate":0.5,"acceptance_histogram":[1,1,1,1],"num_spec_steps":4,'
    '"num_accepted_draft_tokens":6,"num_draft_tokens":12,"num_spec_tokens":3}}}'
)


def test_the_usage_chunk_carries_the_engines_account_in_seconds():
    engine = parse_chunk(USAGE_CHUNK, "chat").engine
    assert engine is not None
    assert engine.queue == pytest.approx(0.00004) and engine.prefill == pytest.approx(0.0118)
    assert engine.decode == pytest.approx(0.0503) and engine.mean_itl == pytest.approx(0.0072)
    assert (engine.spec_acceptance_length, engine.spec_acceptance_rate) == (2.5, 0.5)


@pytest.mark.parametrize("metrics", [None, "fast", {"queue_time_ms": "soon", "time_to_first_token_ms": -1}])
def test_a_missing_or_garbled_account_leaves_the_request_as_it_was(metrics):
    chunk = json.loads(USAGE_CHUNK)
    chunk["metrics"] = metrics
    parsed = parse_chunk(json.dumps(chunk), "chat")
    assert parsed.usage is not None and parsed.usage.completion_tokens == 8
    if isinstance(metrics, dict):
        assert parsed.engine is not None and parsed.engine.queue is None and parsed.engine.prefill is None
    else:
        assert parsed.engine is None


def test_the_record_splits_the_clients_ttft_by_the_engines_account():
    engine = parse_chunk(USAGE_CHUNK, "chat").engine
    # Sent at 0, headers at 2 ms, first token at 20 ms: 2 ms of headers, 0.04 ms queued, 11.8 ms of
    # prefill, and 6.16 ms that the engine's account does not hold.
    raw = RawTiming(0.0, (0.020, 0.027, 0.034), 12, 3, headers_at=0.002, engine=engine)
    m = request_metrics(raw)
    assert m.ttft_rest == pytest.approx(0.020 - 0.002 - 0.00004 - 0.0118)
    record = as_record("lw-1", 1.0, "local", "tiny", "chat", "s", 0.034, None, m, "usage", False)
    assert record["engine_queue_s"] == 0.00004 and record["engine_prefill_s"] == 0.0118
    assert record["ttft_rest_s"] == pytest.approx(0.00616, abs=1e-6) and record["spec_acceptance_rate"] == 0.5
    without = as_record("lw-2", 1.0, "local", "tiny", "chat", "s", 0.034, None,
                        request_metrics(RawTiming(0.0, (0.020,), 12, 1)), "usage", False)
    assert "engine_queue_s" not in without
