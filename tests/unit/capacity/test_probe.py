"""The engine alone before a search: a fixed workload, whichever the search's, and two probes told apart."""

from __future__ import annotations

from pathlib import Path

from loadwatch.capacity.probe import WORKLOAD, of_results, probe_change, probe_run
from loadwatch.loadrun.locust import LocustRun
from loadwatch.metrics.capacity import Probe
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
    assert found is not None
    assert found.prefill_ms_per_token == 0.1 and found.prompt_tokens == 128 and found.tpot_ms == 5.0
    assert of_results({"completed": 0}) is None


def engine(ttft_ms: float, tpot_ms: float) -> Probe:
    return Probe(requests=8, prompt_tokens=128, ttft_ms=ttft_ms, tpot_ms=tpot_ms, prefill_ms_per_token=ttft_ms / 128)


def test_two_probes_apart_by_more_than_a_quarter_measured_two_engines():
    day_one = engine(120.0, 21.0)
    day_three = engine(30.0, 5.0)
    assert probe_change(day_one, day_three) == "TTFT -75%, TPOT -76%"
    assert probe_change(day_one, engine(130.0, 20.0)) is None
    assert probe_change(None, day_three) is None
