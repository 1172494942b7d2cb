"""`loadwatch compare` as a release gate: exit 3 on a regression beyond doubt and beyond its margin,
0 otherwise, 1 where it cannot judge, 2 on bad input."""

import numpy as np
import pytest

from loadwatch.cli import main
from loadwatch.report import gate
from tests.unit.report.test_compare import write_results, write_run


def test_a_metric_is_named_as_slo_or_results_name_it_with_or_without_a_margin():
    rules = gate.parse(["ttft_p99_ms=+10%", "p50_tpot_ms", "output_throughput=-5"])
    assert [(r.key, r.margin, r.explicit) for r in rules] == [
        ("p99_ttft_ms", 10.0, True), ("p50_tpot_ms", None, True), ("output_throughput", 5.0, True)]
    assert [r.key for r in gate.parse(None)] == ["p99_ttft_ms", "p99_tpot_ms", "output_throughput"]
    assert not any(r.explicit for r in gate.parse([]))
    with pytest.raises(gate.GateError, match="not a metric compare measures"):
        gate.parse(["ttft_p98_ms=+10%"])
    with pytest.raises(gate.GateError, match="the margin is a percentage"):
        gate.parse(["ttft_p99_ms=ten"])


def test_a_worse_change_fails_only_beyond_doubt_and_beyond_its_margin():
    rule = gate.parse(["ttft_p99_ms=+10%"])[0]

    def row(change, low, high, verdict):
        return {"run": "new", "base": "old", "metric": "p99_ttft_ms", "change_pct": change, "ci_low": low,
                "ci_high": high, "verdict": verdict}

    assert gate.judge([rule], [row(30.0, 20.0, 40.0, "worse")])[0].failed
    assert not gate.judge([rule], [row(6.0, 2.0, 9.0, "worse")])[0].failed, "certain, but within the margin"
    assert not gate.judge([rule], [row(30.0, -5.0, 60.0, "same")])[0].failed, "beyond the margin, but in doubt"
    assert not gate.judge([rule], [row(-30.0, -40.0, -20.0, "better")])[0].failed
    unjudged = gate.judge([rule], [row(30.0, None, None, None)])
    assert gate.exit_code(unjudged) == 1 and "cannot judge ttft_p99_ms" in unjudged[0].line()


def compare(*args: str) -> int:
    return main(["compare", *args])


def test_the_command_exits_3_on_a_regression_beyond_its_margin_and_0_within_it(tmp_path, capsys):
    rng = np.random.default_rng(4)
    base = write_run(tmp_path / "base", rng.normal(100, 5, 80))
    slower = write_run(tmp_path / "slower", rng.normal(130, 5, 80))
    alike = write_run(tmp_path / "alike", rng.normal(101, 5, 80))
    assert compare(str(base), str(slower)) == 3
    said = capsys.readouterr().out
    assert "FAIL: ttft_p99_ms of slower +" in said and "(worse; the gate lets 10 % worse through)" in said
    assert "gate: a regression beyond its margin (exit 3)" in said
    # Single runs: the throughput has no interval; the latencies' come from the records. Not named by
    # the user, the throughput is said unjudged and the gate stands on the rest.
    assert compare(str(base), str(alike)) == 0
    said = capsys.readouterr().out
    assert "cannot judge output_throughput" in said and "gate: passed" in said
    assert compare(str(base), str(slower), "--fail-on", "ttft_p99_ms=+50%") == 0


def test_the_markdown_says_the_gate_a_ci_job_failed_on(tmp_path):
    rng = np.random.default_rng(4)
    base = write_run(tmp_path / "base", rng.normal(100, 5, 80))
    slower = write_run(tmp_path / "slower", rng.normal(130, 5, 80))
    assert compare(str(base), str(slower), "--markdown", str(tmp_path / "gated.md")) == 3
    gated = (tmp_path / "gated.md").read_text()
    assert "## Gate" in gated and "- FAIL: ttft_p99_ms of slower +" in gated
    assert gated.rstrip().endswith("**gate: a regression beyond its margin (exit 3)**")
    assert compare(str(base), str(slower), "--no-gate", "--markdown", str(tmp_path / "tables.md")) == 0
    assert "## Gate" not in (tmp_path / "tables.md").read_text()


def test_the_command_exits_1_when_it_cannot_judge_and_2_on_bad_input(tmp_path, capsys):
    rng = np.random.default_rng(4)
    base = write_run(tmp_path / "base", rng.normal(100, 5, 80))
    slower = write_run(tmp_path / "slower", rng.normal(130, 5, 80))
    assert compare(str(base), str(slower), "--fail-on", "output_throughput=-5%") == 1, "named and unjudged"
    assert compare(str(base), str(slower), "--no-gate") == 0
    no_records = [write_results(tmp_path / f"{n}.json", 1.0, t) for n, t in (("a", 100.0), ("b", 200.0))]
    assert compare(*map(str, no_records)) == 1
    assert "gate: cannot judge (exit 1)" in capsys.readouterr().out
    assert compare(str(base), str(slower), "--fail-on", "speed=+1%") == 2
    assert compare(str(tmp_path / "missing"), str(slower)) == 2
    assert "Traceback" not in capsys.readouterr().out


def test_repeats_gate_the_throughput_over_the_runs(tmp_path):
    before = [write_results(tmp_path / f"a{i}.json", rps, 100.0) for i, rps in enumerate((1.0, 1.02, 0.98))]
    after = [write_results(tmp_path / f"b{i}.json", rps, 100.0) for i, rps in enumerate((0.80, 0.82, 0.79))]
    sides = [f"before={','.join(map(str, before))}", f"after={','.join(map(str, after))}"]
    assert compare(*sides, "--fail-on", "output_throughput=-5%") == 3
    assert compare(*sides, "--fail-on", "output_throughput=-25%") == 0


def test_runs_of_different_workloads_are_not_gated_and_are_said_different(tmp_path, capsys):
    import json

    a = write_results(tmp_path / "a.json", 1.0, 100.0)
    b = write_results(tmp_path / "b.json", 1.0, 100.0)
    for path, dataset, users in ((a, "random", 4), (b, "sharegpt", 8)):
        path.write_text(json.dumps(json.loads(path.read_text()) | {"options": {"dataset": dataset}, "users": users}))
    assert compare(str(a), str(b)) == 2
    said = capsys.readouterr().out
    assert "the runs are not comparable" in said and "workload dataset random -> sharegpt" in said
    assert "users 4 -> 8" in said
    assert compare(str(a), str(b), "--no-gate") == 0
    assert "note: the runs differ in what they sent" in capsys.readouterr().out


def test_a_margin_smaller_than_the_metrics_noise_is_said_noisy_and_fails_nothing():
    rule = gate.parse(["ttft_p99_ms=+10%"])[0]
    row = {"run": "new", "base": "old", "metric": "p99_ttft_ms", "change_pct": 5.0, "ci_low": -25.0,
           "ci_high": 35.0, "verdict": "same"}
    judged = gate.judge([rule], [row])
    assert judged[0].noise == 30.0 and not judged[0].failed and gate.exit_code(judged) == 0
    line = judged[0].line()
    assert line.startswith("noisy: ttft_p99_ms of new +5.0 %") and "spans ±30 %" in line and "about 9 times" in line
    assert gate.outcome(judged) == "gate: passed; noisy: ttft_p99_ms (a change of its margin is within its noise)"
    resolved = gate.judge([rule], [{**row, "ci_low": 1.0, "ci_high": 9.0, "verdict": "worse"}])
    assert resolved[0].noise is None and resolved[0].line().startswith("ok: ")
    # Beyond its margin and beyond doubt, a wide interval still fails: the noise hid nothing.
    failed = gate.judge([rule], [{**row, "change_pct": 60.0, "ci_low": 20.0, "ci_high": 110.0, "verdict": "worse"}])
    assert failed[0].failed and failed[0].line().startswith("FAIL") and "noisy" not in gate.outcome(failed)
