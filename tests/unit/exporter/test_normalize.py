"""One normalised schema from every vLLM generation's /metrics.

vllm-0.32-*.txt are real payloads of vLLM 0.32 (CPU); vllm-0.8-v0.txt and vllm-0.10-v1.txt are
reconstructed from the metric names those versions document, with invented values.
"""

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadwatch.exporter.normalize import keep, normalize

PAYLOADS = Path(__file__).resolve().parents[2] / "data" / "payloads"
ALL = sorted(p.name for p in PAYLOADS.glob("*.txt"))
CORE = {"requests_running", "requests_waiting", "kv_cache_usage_ratio", "preemptions", "prompt_tokens",
        "generation_tokens", "request_success", "time_to_first_token_seconds", "inter_token_latency_seconds",
        "e2e_request_latency_seconds", "request_queue_time_seconds", "request_prefill_time_seconds",
        "request_decode_time_seconds"}


def load(name: str):
    return normalize((PAYLOADS / name).read_text(), "vllm-a")


def raw(name: str, sample_name: str) -> float:
    for family in text_string_to_metric_families((PAYLOADS / name).read_text()):
        for s in family.samples:
            if s.name == sample_name:
                return s.value
    raise KeyError(sample_name)


@pytest.mark.parametrize("payload", ALL)
def test_every_version_gives_the_core_schema_with_target_and_model(payload):
    snapshot = load(payload)
    names = {n.removeprefix("loadwatch_engine_") for n in snapshot.families}
    assert CORE <= names
    for family in snapshot.families.values():
        for sample in family.samples:
            assert sample.name.startswith("loadwatch_engine_")
            assert not sample.name.endswith("_created")
            assert sample.labels["target"] == "vllm-a" and sample.labels["model"]
            assert "model_name" not in sample.labels


@pytest.mark.parametrize(("payload", "engine"), [("vllm-0.8-v0.txt", ""), ("vllm-0.10-v1.txt", "0")])
def test_old_names_feed_the_new_schema(payload, engine):
    snapshot = load(payload)
    key = ("llama-8b", engine)
    assert snapshot.value("kv_cache_usage_ratio", key) == 0.93
    assert snapshot.value("request_success", key) == 40.0
    itl = snapshot.families["loadwatch_engine_inter_token_latency_seconds"]
    assert {s.name for s in itl.samples} == {"loadwatch_engine_inter_token_latency_seconds_" + x
                                            for x in ("bucket", "sum", "count")}
    assert next(s.value for s in itl.samples if s.name.endswith("_count")) == 3400
    labels = itl.samples[0].labels
    assert ("engine" in labels) == bool(engine)


def test_current_names_match_the_real_payload():
    name = "vllm-0.32-kv-pressure.txt"
    snapshot = load(name)
    key = ("tiny", "0")
    assert snapshot.value("kv_cache_usage_ratio", key) == raw(name, "vllm:kv_cache_usage_perc")
    assert snapshot.value("requests_waiting", key) == raw(name, "vllm:num_requests_waiting")
    assert snapshot.value("prefix_cache_hits", key) == raw(name, "vllm:prefix_cache_hits_total")
    ttft_count = next(s.value for s in snapshot.families["loadwatch_engine_time_to_first_token_seconds"].samples
                      if s.name.endswith("_count"))
    assert ttft_count == raw(name, "vllm:time_to_first_token_seconds_count")
    reasons = {s.labels["finished_reason"] for s in snapshot.families["loadwatch_engine_request_success"].samples}
    assert {"stop", "length"} <= reasons


def test_spec_decode_per_position_keeps_its_position_label():
    family = load("vllm-0.10-v1.txt").families["loadwatch_engine_spec_decode_accepted_tokens_per_position"]
    assert sorted(s.labels["position"] for s in family.samples) == ["0", "1", "2"]


def test_new_name_wins_over_its_deprecated_twin():
    text = ("# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n"
            "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.7\n")
    assert normalize(text, "t").value("kv_cache_usage_ratio", ("m", "")) == 0.5


def test_garbage_is_an_error():
    with pytest.raises(ValueError):
        normalize("vllm:num_requests_running{model_name=\"m\" 3\n", "t")


def test_prefilter_keeps_only_what_is_read():
    assert keep('vllm:num_requests_running{engine="0",model_name="tiny"} 0.0')
    assert keep("# TYPE vllm:prefix_cache_hits_total counter")
    assert not keep('vllm:prefix_cache_hits_created{engine="0",model_name="tiny"} 1.7e+09')
    assert not keep('vllm:num_requests_running_extra 1')
    assert not keep("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")


def test_a_page_without_vllm_metrics_is_an_error():
    with pytest.raises(ValueError, match="no vLLM metrics"):
        normalize("<html><body>502 Bad Gateway</body></html>", "t")
    with pytest.raises(ValueError, match="no vLLM metrics"):
        normalize("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3.0\n", "t")
