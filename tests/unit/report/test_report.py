"""The report without Prometheus: the client side is written, and the missing part is said."""

import json

from loadwatch.cli import main
from tests.conftest import free_port

RESULTS = {
    "run_id": "r1", "target": "http://127.0.0.1:8000", "started_at": 1795000000.0, "ended_at": 1795000030.0,
    "completed": 90, "failed": 1, "duration": 30.0, "request_throughput": 3.0, "request_goodput": 2.5,
    "output_throughput": 300.0, "total_token_throughput": 450.0, "failure_ratio": 0.011,
    "failures": {"http_500": 1}, "stages": [], "slo": [{"name": "ttft_p99_ms", "limit": 500.0, "measured": 612.5,
                                                        "passed": False}],
    **{f"{stat}_{metric}_ms": 10.0 for metric in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p99")},
}


def test_unreachable_prometheus_leaves_a_client_report_and_a_note(tmp_path, capsys):
    (tmp_path / "results.json").write_text(json.dumps(RESULTS))
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["report", str(tmp_path), "--prometheus", url]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["client"]["completed"] == 90 and report["engine"] == {} and report["plot"] is None
    assert f"The engine's side is missing: cannot read from Prometheus at {url}" in report["engine_missing"]
    text = (tmp_path / "report.md").read_text()
    assert report["engine_missing"] in text and "n/a | n/a" not in text  # one sentence, not rows of n/a
    assert "| 90 | 1 | 0 | 3.00 | 300.00 | 450.00 | 2.50 |" in text
    assert "| ttft_p99_ms | 500 | 612.500 | BROKEN |" in text and "## Engine" not in text
    assert "warning:" in capsys.readouterr().out


def test_a_run_folder_without_results_is_named(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 1
    assert f"cannot read {tmp_path / 'results.json'}" in capsys.readouterr().out


def test_a_saturated_load_generator_is_a_note_of_the_report(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({**RESULTS, "saturated": {"1": "it used 97% of a CPU core"},
                                                       "busy": {"1": 0.97, "2": 0.41, "master": 0.04}}))
    assert main(["report", str(tmp_path), "--prometheus", f"http://127.0.0.1:{free_port()}"]) == 0
    notes = json.loads((tmp_path / "report.json").read_text())["notes"]
    assert any("Locust process 1 was saturated (it used 97% of a CPU core)" in n for n in notes)
    assert "Run more processes" in (tmp_path / "report.md").read_text()
    assert ("Load generator: each Locust process used 97.0 % (worker 1), 41.0 % (worker 2), 4.0 % (master) over the run"
            in (tmp_path / "report.md").read_text())


def test_an_open_loop_states_its_schedule_kept_and_one_that_fell_short_is_a_note(tmp_path):
    arrivals = {"sent": 380, "dropped": 3, "requested_rate": 40.0, "scheduled_rate": 39.2, "achieved_rate": 31.0,
                "kept": 0.8, "lag_ms": {"median": 250.0, "p90": 700.0, "p99": 900.0, "max": 950.0}, "fell_short": True}
    (tmp_path / "results.json").write_text(json.dumps({**RESULTS, "arrivals": arrivals, "busy": {"local": 0.35}}))
    assert main(["report", str(tmp_path), "--prometheus", f"http://127.0.0.1:{free_port()}"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["load_generator"] == {"busy": {"local": 0.35}, "arrivals": arrivals}
    text = (tmp_path / "report.md").read_text()
    assert "Load generator: each Locust process used 35.0 % of a core over the run" in text
    assert ("Open loop: asked 40 requests/s, drawn 39.20/s, sent 31.00/s; arrivals went out 250.0 ms late at the "
            "median, 900.0 ms at p99. 3 were dropped at --max-concurrency.") in text
    assert any("kept under 95% of its schedule's pace: the load generator, not the server, was the limit" in note
               for note in report["notes"])
    page = (tmp_path / "report.html").read_text()
    assert "Open loop: asked 40 requests/s, drawn 39.20/s" in page and "used 35.0 % of a core" in page


def test_the_clients_rejections_are_set_beside_the_engines_and_a_difference_is_named():
    from loadwatch.report.engine import rejections_compared

    reasons = {"max_num_queued_reqs": 40}
    assert rejections_compared(0, {}, None) is None and rejections_compared(0, {}, 0.0) is None
    same = rejections_compared(40, reasons, 40.0)
    assert same == ("Rejected by admission control: 40 by the client's count, max_num_queued_reqs 40; the engine "
                    "counted the same (40, admission_rejections).", True)
    words, agree = rejections_compared(40, reasons, 43.0)
    assert "the engine counted 43 (admission_rejections): they differ by +3" in words and not agree
    words, agree = rejections_compared(40, reasons, None)
    assert "could not be compared" in words and not agree


class CounterAt:
    """Stands in for Prometheus: the summed counter's last value by a time, and its resets."""

    def __init__(self, values: dict[float, float], resets: float = 0.0) -> None:
        self.values, self.resets = values, resets

    def scalar(self, expr: str, at: float) -> float | None:
        if expr.startswith("sum(resets("):
            return self.resets
        seen = [v for t, v in sorted(self.values.items()) if t <= at]
        return seen[-1] if seen else None


def test_the_engines_count_is_its_counters_rise_over_the_run_not_an_extrapolation():
    from loadwatch.report.engine import counter_rise

    assert counter_rise(CounterAt({0.0: 12.0, 35.0: 362.0}), "c", 10.0, 45.0) == 350.0
    assert counter_rise(CounterAt({20.0: 40.0}), "c", 10.0, 45.0) == 40.0  # the series began within the run
    assert counter_rise(CounterAt({}), "c", 10.0, 45.0) is None  # an engine without the counter
    assert counter_rise(CounterAt({0.0: 300.0, 35.0: 20.0}, resets=1.0), "c", 10.0, 45.0) is None  # restarted


def test_a_traffic_split_reports_each_adapters_ttft_and_tpot(tmp_path):
    figures = {key: value for key, value in RESULTS.items() if key.endswith("_ms") or key in (
        "completed", "failed", "output_throughput")}
    models = {"lora-1": {**figures, "median_ttft_ms": 12.5}, "lora-2": {**figures, "p99_tpot_ms": 40.0}}
    (tmp_path / "results.json").write_text(json.dumps({**RESULTS, "models": models}))
    assert main(["report", str(tmp_path), "--prometheus", f"http://127.0.0.1:{free_port()}"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert [m["model"] for m in report["models"]] == ["lora-1", "lora-2"]
    text = (tmp_path / "report.md").read_text()
    assert "## Models and adapters" in text and "| lora-1 | 90 | 1 | 300.00 | 12.5 ms |" in text
    assert "40.0 ms |" in text.split("| lora-2 |")[1].splitlines()[0]
    assert "Models and adapters" in (tmp_path / "report.html").read_text()
