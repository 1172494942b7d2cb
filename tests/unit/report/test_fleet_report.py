"""A fleet's part of the run report: each replica's figures beside its engine's peaks, the spread and a
replica lost, as report.md says them."""

from __future__ import annotations

from loadwatch.metrics.results import Results
from loadwatch.report.fleet import fleet_figures
from loadwatch.report.markdown import replica_rows


def results(**extra) -> Results:
    return Results.model_validate({"run_id": "r", "started_at": 100.0, "ended_at": 130.0, "completed": 30, **extra})


def test_each_replica_is_a_row_and_a_lost_replica_is_said():
    fleet = fleet_figures(results(
        replicas={"a": {"completed": 20, "share": 2 / 3, "median_ttft_ms": 40.0, "p99_ttft_ms": 90.0},
                  "b": {"completed": 10, "share": 1 / 3, "median_ttft_ms": 400.0, "p99_ttft_ms": 900.0,
                        "failed": 2, "failures": {"http_500": 2}}},
        busiest_share_ratio=4 / 3,
        replicas_lost=[{"replica": "b", "lost_at": 110.0, "back_at": None, "failed_in_window": 3,
                        "router_stopped_after_s": 1.0, "recovered_after_s": 2.5}]), None, 100.0, 130.0)
    assert fleet is not None
    lines = replica_rows(fleet)
    assert lines[2].startswith("| a | 20 | 0 | 66.7 % | 40.0 ms | 90.0 ms |")
    assert lines[3].startswith("| b | 10 | 2 | 33.3 %"), "the failures whose answers named b (smg's header)"
    assert "n/a" in lines[3], "no Prometheus: the engine's peaks are unknown, not zero"
    assert "The busiest replica served 1.33 times an even share." in lines
    assert any(line.startswith("replica b lost at +10.0 s: 3 requests failed in its outage") for line in lines)


def test_a_run_of_one_engine_has_no_fleet_part():
    assert fleet_figures(results(), None, 100.0, 130.0) is None


def test_the_queue_spread_says_an_imbalance_an_even_split_of_requests_hides():
    fleet = {"replicas": [{"replica": "a", "completed": 60, "share": 0.5, "median_ttft_ms": 39.0, "p99_ttft_ms": 129.0,
                           "median_tpot_ms": 10.0, "running_peak": 2.0, "waiting_peak": 0.0, "kv_cache_peak": 0.58},
                          {"replica": "b", "completed": 60, "share": 0.5, "median_ttft_ms": 4200.0,
                           "p99_ttft_ms": 5236.0, "median_tpot_ms": 10.0, "running_peak": 1.0, "waiting_peak": 6.0,
                           "kv_cache_peak": 0.26}],
             "busiest_share_ratio": 1.0, "waiting_spread": 6.0, "unattributed": 0, "lost": []}
    assert any(line.startswith("Queue spread: one replica's waiting peak was 6 above another's")
               for line in replica_rows(fleet))
