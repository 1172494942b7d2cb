import pytest

from loadwatch.exporter.normalize import Snapshot
from loadwatch.exporter.window import peaks, ratios

KEY = ("m", "0")


def snap(**values: float) -> Snapshot:
    return Snapshot(values={name: {KEY: v} for name, v in values.items()})


def by_name(families):
    return {f.name: f.samples[0].value for f in families if f.samples}


def test_peaks_are_the_window_maximum_not_the_last_value():
    window = [snap(kv_cache_usage_ratio=0.2, requests_waiting=0), snap(kv_cache_usage_ratio=1.0, requests_waiting=9),
              snap(kv_cache_usage_ratio=0.3, requests_waiting=1)]
    got = by_name(peaks(window, "t"))
    assert got == {"loadwatch_engine_kv_cache_usage_ratio_max": 1.0, "loadwatch_engine_requests_waiting_max": 9}
    labels = peaks(window, "t")[0].samples[0].labels
    assert labels == {"target": "t", "model": "m", "engine": "0"}


def test_ratios_come_from_counter_increases_over_the_window():
    window = [snap(prefix_cache_queries=1000, prefix_cache_hits=100, spec_decode_drafts=10,
                   spec_decode_draft_tokens=30, spec_decode_accepted_tokens=12),
              snap(prefix_cache_queries=1400, prefix_cache_hits=400, spec_decode_drafts=30,
                   spec_decode_draft_tokens=90, spec_decode_accepted_tokens=42)]
    got = by_name(ratios(window, "t"))
    assert got["loadwatch_engine_prefix_cache_hit_ratio"] == pytest.approx(300 / 400)
    assert got["loadwatch_engine_spec_decode_acceptance_ratio"] == pytest.approx(30 / 60)
    assert got["loadwatch_engine_spec_decode_mean_acceptance_length"] == pytest.approx(1 + 30 / 20)


def test_no_traffic_or_a_restart_gives_no_ratio_rather_than_a_wrong_one():
    idle = [snap(prefix_cache_queries=5, prefix_cache_hits=1), snap(prefix_cache_queries=5, prefix_cache_hits=1)]
    assert ratios(idle, "t") == []
    restarted = [snap(prefix_cache_queries=500, prefix_cache_hits=100),
                 snap(prefix_cache_queries=20, prefix_cache_hits=5)]
    assert ratios(restarted, "t") == []


def test_v0_rate_gauges_are_the_fallback():
    window = [snap(v0_prefix_hit_rate=0.42, v0_spec_acceptance_rate=0.61)]
    got = by_name(ratios(window, "t"))
    assert got == {"loadwatch_engine_prefix_cache_hit_ratio": 0.42,
                   "loadwatch_engine_spec_decode_acceptance_ratio": 0.61}
