import json
from pathlib import Path

import numpy as np
import pytest

from loadwatch.cli import main
from loadwatch.report.build import ReportError
from loadwatch.report.compare import compare, load_side, side_spec


def results(rps: float, ttft: float) -> dict:
    figures = {"request_throughput": rps, "output_throughput": rps * 200, "input_throughput": rps * 50}
    for metric in ("ttft", "tpot", "e2el"):
        for stat in ("mean", "median", "p99"):
            figures[f"{stat}_{metric}_ms"] = ttft if metric == "ttft" else 100.0
    return {"run_id": "r", "completed": 10, "started_at": 0.0, "ended_at": 1.0, **figures}


def write_results(path: Path, rps: float, ttft: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results(rps, ttft)))
    return path


def write_run(folder: Path, ttft_ms: np.ndarray, records: str | None = "results.requests.jsonl") -> Path:
    """A run folder as `loadwatch run` leaves it: results.json naming its per-request records."""
    folder.mkdir(parents=True)
    lines = []
    for i, ttft in enumerate(ttft_ms):
        lines.append(json.dumps({
            "id": str(i), "start": 1000.0 + i * 0.5, "worker": "local", "model": "m", "scenario": "chat",
            "stage": "load", "failure": None, "elapsed_s": ttft / 1000 + 1.0, "ttft_s": ttft / 1000,
            "headers_s": None, "tpot_s": 0.02, "prompt_tokens": 10, "output_tokens": 50, "tokens_from": "usage"}))
    (folder / "results.requests.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "results.json").write_text(json.dumps(results(1.0, float(np.mean(ttft_ms))) | {"records": records}))
    return folder


def test_sides_are_named_and_repeats_joined_by_commas():
    assert side_spec("runs/20261122T101010Z/results.json") == (
        "20261122T101010Z", [Path("runs/20261122T101010Z/results.json")])
    assert side_spec("prefix-on=a.json") == ("prefix-on", [Path("a.json")])
    assert side_spec("on=runs/a1,runs/a2,runs/a3") == ("on", [Path("runs/a1"), Path("runs/a2"), Path("runs/a3")])
    assert side_spec("b.json")[0] == "b"


def test_the_tables_keep_the_articles_layout_and_say_when_there_is_no_interval(tmp_path):
    base = load_side(f"baseline={write_results(tmp_path / 'a.json', 1.31, 7983.40)}")
    chunked = load_side(f"chunked={write_results(tmp_path / 'b.json', 1.38, 6631.39)}")
    text, rows = compare([base, chunked])
    figures, changes = text.split("## chunked against baseline")
    assert "| baseline | 1.31 | 262.00 | 65.50 | 7983.40 |" in figures
    assert "mean TTFT (ms) | median TTFT (ms) | p99 TTFT (ms)" in figures
    assert "| req/s | 1.31 | 1.38 | +5.34% | n/a | n/a |" in changes
    assert "| input tok/s | 65.50 | 69.00 | +5.34% | n/a | n/a |" in changes
    assert "| mean TTFT (ms) | 7983.40 | 6631.39 | -16.94% | n/a | n/a |" in changes
    row = next(r for r in rows if r["metric"] == "mean_ttft_ms")
    assert row["run"] == "chunked" and round(row["change_pct"], 2) == -16.94 and row["verdict"] is None


def test_one_run_is_not_a_comparison(tmp_path):
    with pytest.raises(ReportError, match="at least two"):
        compare([load_side(str(write_results(tmp_path / "a.json", 1, 1)))])


def test_a_real_change_is_better_and_the_same_distribution_is_same(tmp_path):
    rng = np.random.default_rng(1)
    slow = load_side(f"off={write_run(tmp_path / 'off', rng.normal(1400, 100, 150))}")
    fast = load_side(f"on={write_run(tmp_path / 'on', rng.normal(60, 10, 150))}")
    again = load_side(f"off2={write_run(tmp_path / 'off2', rng.normal(1400, 100, 150))}")
    _, rows = compare([slow, fast, again])
    by = {(r["run"], r["metric"]): r for r in rows}
    on = by[("on", "median_ttft_ms")]
    assert on["verdict"] == "better" and on["ci_high"] < -90 and on["method"] == "requests"
    assert on["ci_low"] <= on["change_pct"] <= on["ci_high"]
    assert by[("off2", "median_ttft_ms")]["verdict"] == "same"
    assert by[("off2", "mean_ttft_ms")]["ci_low"] < 0 < by[("off2", "mean_ttft_ms")]["ci_high"]
    # One run a side: throughput has one value each, so no interval.
    assert by[("on", "request_throughput")]["verdict"] is None


def test_repeats_put_the_noise_between_runs_into_the_interval(tmp_path):
    """Runs of one configuration that differ by 10 % each: the request-only interval of one pair
    is narrow and calls it a change; with three repeats a side, the runs are the observations: `same`."""
    rng = np.random.default_rng(2)
    offsets = {"a1": 100, "a2": 110, "a3": 90, "b1": 108, "b2": 92, "b3": 101}
    for name, centre in offsets.items():
        write_run(tmp_path / name, rng.normal(centre, 5, 200))
    one_pair = compare([load_side(str(tmp_path / "a1")), load_side(str(tmp_path / "b1"))])[1]
    assert next(r for r in one_pair if r["metric"] == "median_ttft_ms")["verdict"] == "worse"
    text, rows = compare([load_side(f"a={tmp_path / 'a1'},{tmp_path / 'a2'},{tmp_path / 'a3'}"),
                          load_side(f"b={tmp_path / 'b1'},{tmp_path / 'b2'},{tmp_path / 'b3'}")])
    median = next(r for r in rows if r["metric"] == "median_ttft_ms")
    assert median["verdict"] == "same" and median["method"] == "runs"
    assert "a (3 runs)" in text and "Welch's t over the logs of the runs' figures" in text
    assert next(r for r in rows if r["metric"] == "request_throughput")["method"] == "runs"


def test_the_records_are_found_through_the_path_in_the_results(tmp_path):
    folder = write_run(tmp_path / "moved", np.full(30, 100.0), records="../elsewhere/requests.jsonl")
    (tmp_path / "elsewhere").mkdir()
    (folder / "results.requests.jsonl").rename(tmp_path / "elsewhere" / "requests.jsonl")
    assert load_side(str(folder / "results.json")).runs[0].latencies is not None


def test_the_command_prints_and_writes_markdown_and_json(tmp_path, capsys):
    write_results(tmp_path / "a.json", 2.0, 100.0)
    write_results(tmp_path / "b.json", 3.0, 50.0)
    out, rows = tmp_path / "ab.md", tmp_path / "ab.json"
    assert main(["compare", f"base={tmp_path / 'a.json'}", str(tmp_path / "b.json"), "--markdown", str(out),
                 "--json", str(rows), "--no-gate"]) == 0
    printed = capsys.readouterr().out
    assert "| req/s | 2.00 | 3.00 | +50.00% |" in printed
    assert out.read_text() in printed
    written = json.loads(rows.read_text())["rows"]
    assert {"run", "metric", "change_pct", "ci_low", "ci_high", "verdict"} <= set(written[0])


def test_a_broken_results_file_is_named_without_a_traceback(tmp_path, capsys):
    (tmp_path / "a.json").write_text("{not json")
    write_results(tmp_path / "b.json", 3.0, 50.0)
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    assert "a.json is not a results JSON" in capsys.readouterr().out


def test_a_results_file_with_a_wrong_figure_is_named_without_a_traceback(tmp_path, capsys):
    broken = results(2.0, 100.0) | {"p99_ttft_ms": "fast"}
    (tmp_path / "a.json").write_text(json.dumps(broken))
    write_results(tmp_path / "b.json", 3.0, 50.0)
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    out = capsys.readouterr().out
    assert "not a loadwatch results file" in out and "p99_ttft_ms" in out and "Traceback" not in out
