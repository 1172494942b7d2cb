"""The capacity search's report.html, from a search's result and its levels' records (no Prometheus):
over a second of matplotlib and Bokeh, so in this tier."""

import json

import pytest

from loadwatch.capacity.diagnose import Diagnosis
from loadwatch.capacity.levels import Level
from loadwatch.capacity.output import conclusion, write
from tests.pages import open_offline
from tests.unit.metrics.test_ttft_split import queued

pytestmark = [pytest.mark.browser, pytest.mark.needs("chromium")]


def test_the_capacity_page_has_the_curve_with_the_knee_and_the_search_over_time(tmp_path):
    levels = []
    for i, users in enumerate((1, 2, 4)):
        client = {"median_ttft_ms": 20.0 * users, "p99_ttft_ms": 40.0 * users, "p99_tpot_ms": 5.0,
                  "output_throughput": 100.0 * users, "request_throughput": users}
        level = Level(i + 1, users, "users", f"level-0{i + 1}", start=1795000000.0 + 10 * i,
                      end=1795000010.0 + 10 * i, results={"completed": 40, "slo": [], **client})
        levels.append(level)
    (tmp_path / "levels").mkdir()
    (tmp_path / "levels" / "level-01.requests.jsonl").write_text(
        "".join(json.dumps(queued(i, 0.001)) + "\n" for i in range(20)))
    result = conclusion("users", "users", levels, 2.0, Diagnosis("slo_only", {}), 0.5, "the rule")
    write(tmp_path, result)
    page = (tmp_path / "report.html").read_text()
    assert "Latency against load (ms), with the knee and the operating point" in page and "knee 2" in page
    assert "Client TTFT, p50 and p99" in page and "level-02" in page  # over time, each level marked
    assert "data:image/png;base64," in page  # the Markdown's plot, inlined
    drawn = open_offline(tmp_path / "report.html")
    assert not drawn["errors"]
    assert "Latency against load (ms), with the knee and the operating point" in drawn["titles"]
    assert any(t.startswith("Client TTFT") for t in drawn["titles"])
