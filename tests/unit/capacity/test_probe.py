"""The engine alone before a search: a fixed workload, whichever the search's, and two probes told apart."""

from __future__ import annotations

from pathlib import Path

from loadwatch.capacity.probe import WORKLOAD, of_results, probe_change, probe_run
from loadwatch.loadrun.locust import LocustRun
from loadwatch.metrics.slo import parse_slo


def test_the_probe_runs_the_fixed_workload_keeping_only_which_model_to_ask():
    template = LocustRun(Path("agent.py"), slo=[parse_slo("ttft_p90_ms=1000")], options=[
        "--dataset", "prefix-repetition", "--prefix-len", "512", "--model", "tiny", "--endpoint=completions"])
    run = probe_run(template, Path("probe.json"))
    assert run.locustfile.name == "chat.py" and run.slo == [] and run.load.users == 1
    assert run.options == [*WORKLOAD, "--model", "tiny", "--endpoint=completions"]
    assert "--ignore-eos" in run.command() and "prefix-repetition" not in run.command()


def test_a_probe_reads_prefill_per_prompt_token_and_tpot():
    found = of_results({"completed": 20, "median_ttft_ms": 12.8, "median_tpot_ms": 5.0, "total_input_tokens": 2560})
    assert found["prefill_ms_per_token"] == 0.1 and found["prompt_tokens"] == 128 and found["tpot_ms"] == 5.0
    assert of_results({"completed": 0}) is None


def test_two_probes_apart_by_more_than_a_quarter_measured_two_engines():
    day_one = {"ttft_ms": 120.0, "tpot_ms": 21.0}
    day_three = {"ttft_ms": 30.0, "tpot_ms": 5.0}
    assert probe_change(day_one, day_three) == "TTFT -75%, TPOT -76%"
    assert probe_change(day_one, {"ttft_ms": 130.0, "tpot_ms": 20.0}) is None
    assert probe_change(None, day_three) is None
