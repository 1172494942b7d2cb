"""report.html: one self-contained page (Bokeh inlined), its series from the records, large runs sampled.
Chromium opens it offline in the integration tier (tests/integration/test_report_page.py)."""

import json
import math

import pytest

from loadwatch.report import timeline
from tests.unit.metrics.test_ttft_split import queued
from tests.unit.report.test_report import RESULTS


def run_folder(tmp_path, records):
    (tmp_path / "results.json").write_text(json.dumps({**RESULTS, "records": "results.requests.jsonl"}))
    (tmp_path / "results.requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path


def test_a_large_run_draws_its_slowest_one_percent_and_a_sample_of_the_rest(monkeypatch):
    monkeypatch.setattr(timeline, "MAX_POINTS", 50)
    records = [queued(i, 0.001 * (i % 7)) for i in range(1000)] + [queued(1000, 3.0)]
    points, note = timeline.scatter_points(records)
    assert len(points["id"]) == 50 and "q1000" in points["id"]
    assert note == "50 of 1,001 measured requests: all of the slowest 1 % and a uniform sample of the rest"
    assert points["cause"][points["id"].index("q1000")].startswith("waiting in the engine's queue: 3000.0 ms")


def test_client_series_are_per_window_of_the_requests_finishing_in_it_with_gaps_not_zeros():
    # q_i starts at 1795000000 + i and ends 0.3 s later: one request a second, none after the tenth.
    records = [queued(i, 0.0) for i in range(10)]
    records.append({**queued(10, 0.0), "failure": "http_500", "ttft_s": None})
    over = timeline.client_over_time(records, 1795000000.0, 1795000030.0)
    assert over["seconds"] == 1.0
    assert over["TTFT p50"][:10] == pytest.approx([24.0] * 10)
    assert all(math.isnan(v) for v in over["TTFT p50"][11:20])
    assert over["output tok/s"][3] == 5.0 and over["failures"]["http_500"][10] == 1.0
