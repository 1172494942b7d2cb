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
                  "b": {"completed": 10, "share": 1 / 3, "median_ttft_ms": 400.0, "p99_ttft_ms": 900.0}},
        busiest_share_ratio=4 / 3,
        replicas_lost=[{"replica": "b", "lost_at": 110.0, "back_at": None, "failed_in_window": 3,
                        "router_stopped_after_s": 1.0, "recovered_after_s": 2.5}]), None, 100.0, 130.0)
    assert fleet is not None
    lines = replica_rows(fleet)
    assert lines[2].startswith("| a | 20 | 66.7 % | 40.0 ms | 90.0 ms |") and lines[3].startswith("| b | 10 | 33.3 %")
    assert "n/a" in lines[3], "no Prometheus: the engine's peaks are unknown, not zero"
    assert "The busiest replica served 1.33 times an even share." in lines
    assert any(line.startswith("replica b lost at +10.0 s: 3 requests failed in its outage") for line in lines)


def test_a_run_of_one_engine_has_no_fleet_part():
    assert fleet_figures(results(), None, 100.0, 130.0) is None
