"""What the recorder exports for sessions, tools and caches, as Prometheus reads it."""

from prometheus_client import generate_latest

from loadwatch.loadgen.exposition import client_registry
from loadwatch.loadgen.recorder import LLMRequest
from loadwatch.loadgen.state import RunState
from loadwatch.metrics.definitions import turn_bucket
from loadwatch.metrics.timing import RawTiming, request_metrics


def test_turns_fall_in_bounded_buckets():
    assert [turn_bucket(t) for t in (None, 1, 2, 3, 4, 5, 8, 9, 400)] == ["", "1", "2", "3-4", "3-4", "5-8", "5-8",
                                                                          "9+", "9+"]


def test_session_turns_label_the_latencies_and_tool_calls_and_cache_are_counted():
    state = RunState(["agent"], "http://x")
    recorder = state.recorder
    for turn in (1, 2, 3, 4, None):
        timing = RawTiming(0.0, (0.1, 0.2, 0.3), prompt_tokens=100, completion_tokens=3, answer_at=0.2,
                           cached_tokens=80, tool_calls=2)
        recorder.record(LLMRequest("m", "agent", 1.0, 0.3, request_metrics(timing), turn=turn))
    text = generate_latest(client_registry(state, lambda: 0)).decode()
    assert 'loadwatch_client_time_to_first_token_seconds_count{model="m",scenario="agent",turn="3-4"} 2.0' in text
    # Outside a session the label is empty, which Prometheus stores as no label: series stay as they were.
    assert 'loadwatch_client_time_to_first_token_seconds_count{model="m",scenario="agent",turn=""} 1.0' in text
    assert 'loadwatch_client_time_to_first_answer_token_seconds_sum{model="m",scenario="agent",turn="1"} 0.2' in text
    assert 'loadwatch_client_cached_prompt_tokens_ratio_bucket{le="0.75",model="m",scenario="agent",turn="2"} 0.0' \
        in text
    assert 'loadwatch_client_cached_prompt_tokens_ratio_bucket{le="0.9",model="m",scenario="agent",turn="2"} 1.0' \
        in text
    assert 'loadwatch_client_tool_calls_total{model="m",scenario="agent"} 10.0' in text
