import json
from pathlib import Path

import pytest

from loadwatch.cli import main
from loadwatch.metrics.results import Results
from loadwatch.report.build import ReportError
from loadwatch.report.compare import change, compare, run_name


def results(rps: float, ttft: float) -> dict:
    figures = {"request_throughput": rps, "output_throughput": rps * 200}
    for metric in ("ttft", "tpot", "e2el"):
        for stat in ("mean", "median", "p99"):
            figures[f"{stat}_{metric}_ms"] = ttft if metric == "ttft" else 100.0
    return {"run_id": "r", "completed": 10, "started_at": 0.0, "ended_at": 1.0, **figures}


def test_change_is_signed_percent_of_the_baseline_as_in_the_seeds():
    assert change(1.31, 1.38) == "+5.34%"
    assert change(7983.40, 6631.39) == "-16.94%"
    assert change(0.0, 1.0) == "n/a" and change(None, 1.0) == "n/a"


def test_tables_have_a_row_per_run_then_changes_against_the_first():
    text = compare([("baseline", Results.model_validate(results(1.31, 7983.40))),
                    ("chunked", Results.model_validate(results(1.38, 6631.39)))])
    figures, changes = text.split("## Change against baseline")
    assert "| baseline | 1.31 | 262.00 | 7983.40 |" in figures
    assert "| chunked | +5.34% | +5.34% | -16.94% |" in changes
    assert "mean TTFT (ms) | median TTFT (ms) | p99 TTFT (ms)" in figures


def test_one_run_is_not_a_comparison():
    with pytest.raises(ReportError, match="at least two"):
        compare([("a", Results.model_validate(results(1, 1)))])


def test_runs_are_named_by_folder_or_given_name():
    assert run_name("runs/20261122T101010Z/results.json") == ("20261122T101010Z",
                                                              Path("runs/20261122T101010Z/results.json"))
    assert run_name("prefix-on=a.json")[0] == "prefix-on"
    assert run_name("b.json")[0] == "b"


def test_the_command_prints_and_writes_markdown(tmp_path, capsys):
    (tmp_path / "a.json").write_text(json.dumps(results(2.0, 100.0)))
    (tmp_path / "b.json").write_text(json.dumps(results(3.0, 50.0)))
    out = tmp_path / "ab.md"
    assert main(["compare", f"base={tmp_path / 'a.json'}", str(tmp_path / "b.json"), "--markdown", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| b | +50.00% | +50.00% | -50.00% |" in printed
    assert out.read_text() in printed


def test_a_broken_results_file_is_named_without_a_traceback(tmp_path, capsys):
    (tmp_path / "a.json").write_text("{not json")
    (tmp_path / "b.json").write_text(json.dumps(results(3.0, 50.0)))
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    assert "a.json is not a results JSON" in capsys.readouterr().out


def test_a_results_file_with_a_wrong_figure_is_named_without_a_traceback(tmp_path, capsys):
    broken = results(2.0, 100.0) | {"p99_ttft_ms": "fast"}
    (tmp_path / "a.json").write_text(json.dumps(broken))
    (tmp_path / "b.json").write_text(json.dumps(results(3.0, 50.0)))
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 1
    out = capsys.readouterr().out
    assert "not a loadwatch results file" in out and "p99_ttft_ms" in out and "Traceback" not in out
