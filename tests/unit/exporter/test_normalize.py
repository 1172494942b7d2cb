"""One normalised schema from every vLLM generation's /metrics.

vllm-0.32-*.txt are real payloads of vLLM 0.32 (CPU); vllm-0.8-v0.txt and vllm-0.10-v1.txt are
reconstructed from the metric names those versions document, with invented values.
"""

import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loadwatch.catalogue import Engine
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
    assert keep("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")
    assert not keep("# HELP python_info Python platform information")


def test_a_page_without_vllm_metrics_is_an_error():
    with pytest.raises(ValueError, match="no vLLM metrics"):
        normalize("<html><body>502 Bad Gateway</body></html>", "t")
    with pytest.raises(ValueError, match="no vLLM metrics"):
        normalize("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3.0\n", "t")


def _samples(snapshot, name: str) -> list:
    family = snapshot.families.get(name)
    return [] if family is None else family.samples


def test_why_requests_wait_and_where_prompt_tokens_came_from_reach_the_schema():
    snapshot = load("vllm-0.32-kv-pressure.txt")
    reasons = {s.labels["reason"]: s.value for s in _samples(snapshot, Engine.REQUESTS_WAITING_BY_REASON)}
    assert set(reasons) == {"capacity", "deferred"}
    sources = {s.labels["source"]: s.value for s in _samples(snapshot, Engine.PROMPT_TOKENS_BY_SOURCE)}
    assert sources == {"local_compute": raw("vllm-0.32-kv-pressure.txt", "vllm:prompt_tokens_by_source_total"),
                       "local_cache_hit": 0.0, "external_kv_transfer": 0.0}
    tiers = {s.labels["source"] for s in _samples(snapshot, Engine.PROMPT_TOKENS_CACHED_BY_SOURCE)}
    assert {"device", "host", "disk", "p2p"} <= tiers


def test_the_cache_configuration_becomes_gauges_and_an_info_metric_with_the_engines_model():
    snapshot = load("vllm-0.32-kv-pressure.txt")
    value = {name: _samples(snapshot, name)[0].value for name in (
        Engine.KV_CACHE_BLOCKS, Engine.KV_CACHE_BLOCK_SIZE, Engine.KV_CACHE_SIZE, Engine.KV_CACHE_MAX_CONCURRENCY)}
    assert value == {Engine.KV_CACHE_BLOCKS: 17, Engine.KV_CACHE_BLOCK_SIZE: 128, Engine.KV_CACHE_SIZE: 2176,
                     Engine.KV_CACHE_MAX_CONCURRENCY: 1.0625}
    (info,) = _samples(snapshot, Engine.CACHE_CONFIG_INFO)
    assert info.labels == {"target": "vllm-a", "model": "tiny", "engine": "0", "prefix_caching": "true",
                           "cache_dtype": "auto"}


def test_an_older_version_states_only_blocks_and_block_size_and_lacks_the_rest():
    old = load("vllm-0.10-v1.txt")
    assert _samples(old, Engine.KV_CACHE_SIZE)[0].value == 2048 * 16  # the product of what it states
    assert Engine.KV_CACHE_MAX_CONCURRENCY not in old.families
    assert _samples(old, Engine.CACHE_CONFIG_INFO)[0].labels["prefix_caching"] == "false"
    for name in (Engine.REQUESTS_WAITING_BY_REASON, Engine.PROMPT_TOKENS_BY_SOURCE, Engine.SLEEP_LEVEL,
                 Engine.ESTIMATED_FLOPS):
        assert name not in old.families
        assert name not in load("vllm-0.8-v0.txt").families


def test_flops_and_bytes_at_zero_are_absent_and_present_once_they_move():
    text = (PAYLOADS / "vllm-0.32-kv-pressure.txt").read_text()
    assert Engine.ESTIMATED_FLOPS not in normalize(text, "t").families  # exported at 0 without --enable-mfu-metrics
    moved = text.replace('vllm:estimated_flops_per_gpu_total{engine="0",model_name="tiny"} 0.0',
                         'vllm:estimated_flops_per_gpu_total{engine="0",model_name="tiny"} 7.5e+12')
    assert _samples(normalize(moved, "t"), Engine.ESTIMATED_FLOPS)[0].value == 7.5e12
    assert Engine.ESTIMATED_READ_BYTES not in normalize(moved, "t").families


@pytest.mark.parametrize(("states", "level"), [((1, 0, 0), 0), ((0, 1, 0), 1), ((0, 0, 1), 2)])
def test_the_sleep_state_is_one_level(states, level):
    text = (PAYLOADS / "vllm-0.32-kv-pressure.txt").read_text()
    for name, value in zip(("awake", "weights_offloaded", "discard_all"), states, strict=True):
        text = re.sub(rf'(vllm:engine_sleep_state{{[^}}]*sleep_state="{name}"}}) \S+', rf"\g<1> {value}.0", text)
    assert _samples(normalize(text, "t"), Engine.SLEEP_LEVEL)[0].value == level


def test_engine_healthy_is_read_where_fault_tolerance_exports_it():
    text = (PAYLOADS / "vllm-0.32-kv-pressure.txt").read_text()
    assert Engine.HEALTHY not in normalize(text, "t").families
    text += ('# HELP vllm:engine_healthy 1 if healthy\n# TYPE vllm:engine_healthy gauge\n'
             'vllm:engine_healthy{engine="0",model_name="tiny"} 0.0\n')
    assert _samples(normalize(text, "t"), Engine.HEALTHY)[0].value == 0


# As vLLM 0.32 (CPU) serving 4 adapters with --max-loras 1 wrote it after 6 requests over them (times
# shortened, the third series made to list several adapters): each change of state is a new series, the
# old ones linger, and the latest (the greatest time) is now.
LORA_INFO = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 1.0
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""} 1795845357.09
vllm:lora_requests_info{max_lora="1",running_lora_adapters="lora-1",waiting_lora_adapters="lora-1"} 1795845357.03
vllm:lora_requests_info{max_lora="1",running_lora_adapters="l2,l3,l4",waiting_lora_adapters="l3,l4"} 1795845357.36
vllm:lora_requests_info{max_lora="1",running_lora_adapters="lora-3",waiting_lora_adapters="lora-3"} 1795845356.71
"""


def test_lora_adapters_are_counted_from_the_latest_series_only():
    snapshot = normalize(LORA_INFO, "vllm-a")
    value = {name: [(s.labels, s.value) for s in _samples(snapshot, name)] for name in (
        Engine.LORA_ADAPTERS_RUNNING, Engine.LORA_ADAPTERS_WAITING, Engine.LORA_MAX_ADAPTERS)}
    labels = {"target": "vllm-a", "model": "tiny", "engine": ""}
    assert value == {Engine.LORA_ADAPTERS_RUNNING: [(labels, 3.0)], Engine.LORA_ADAPTERS_WAITING: [(labels, 2.0)],
                     Engine.LORA_MAX_ADAPTERS: [(labels, 1.0)]}


def test_no_adapter_in_use_counts_zero_and_an_engine_without_lora_has_no_lora_series():
    idle = LORA_INFO.replace("1795845357.09", "1795845358.0")
    snapshot = normalize(idle, "vllm-a")
    assert [s.value for s in _samples(snapshot, Engine.LORA_ADAPTERS_RUNNING)] == [0.0]
    assert [s.value for s in _samples(snapshot, Engine.LORA_MAX_ADAPTERS)] == [1.0]
    assert Engine.LORA_ADAPTERS_RUNNING not in load("vllm-0.32-kv-pressure.txt").families


def test_each_data_parallel_rank_keeps_its_own_series():
    """vllm serve --data-parallel-size 2, recorded with rank 0 queueing and rank 1 idle: the sidecar
    sums nothing, so a rank out of room stays visible beside one with room."""
    text = (PAYLOADS / "vllm-0.32-cpu-data-parallel-2-rank-0-pinned.txt").read_text()
    families = normalize(text, "vllm").families

    def by_rank(name: str) -> dict[str, float]:
        return {s.labels["engine"]: s.value for s in families[name].samples}

    assert by_rank(Engine.REQUESTS_RUNNING) == {"0": 2.0, "1": 0.0}
    assert by_rank(Engine.REQUESTS_WAITING) == {"0": 6.0, "1": 0.0}
    kv = by_rank(Engine.KV_CACHE_USAGE)
    assert kv["0"] > 0 and kv["1"] == 0.0
