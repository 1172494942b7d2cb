"""A capacity search that located no knee names no limit tune can act on: the search after tune's
second step on the embedded engine (2026-11-27) had 68 s of the budget left, held 2 users and stopped,
and its diagnosis, read at a level where nothing bound yet, named `outside_engine`. tune reported that
as the final limit and ended on it."""

from pathlib import Path

from loadwatch.capacity.options import CapacityOptions
from loadwatch.loadrun.locust import LocustRun
from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.slo import parse_slo
from loadwatch.metrics.tune import Tune
from loadwatch.tune import command
from loadwatch.tune.options import TuneOptions
from loadwatch.tune.output import markdown

BROKE = {"name": "level-04", "level": 4.0, "unit": "users", "passed": False,
         "slo": [{"name": "ttft_p90_ms", "passed": False}]}
BATCH = {"max_num_seqs": 2, "max_num_seqs_source": "the server's flags", "requests_running_peak": 2.0,
         "requests_waiting_peak": 3.0, "kv_cache_holds_requests": 7281, "mean_context_tokens": 265}


def capacity(knee: float, limit: str, undecided: str | None) -> Capacity:
    return Capacity.model_validate({"mode": "users", "max_sustainable": knee, "unit": "users", "undecided": undecided,
                                    "limit": limit, "evidence": BATCH, "missed": [], "levels": [BROKE],
                                    "decisive_level": "level-04"})


def test_a_step_whose_capacity_after_has_no_knee_ends_tune_with_its_limit_unknown(tmp_path, monkeypatch):
    searches = iter([capacity(3.0, "batch_slots", None),
                     capacity(2.0, "outside_engine", "--max-duration (68 s) was reached after 2 levels")])
    monkeypatch.setattr(command.Tuner, "measure_capacity", lambda self, config, name: next(searches))

    def trial(arms, *args, **kwargs):
        arms[0].values, arms[1].values = [1800.0, 1700.0, 1750.0], [40.0, 45.0, 42.0]
        arms[0].goodput, arms[1].goodput = [1.0, 1.1, 0.9], [2.0, 2.1, 1.9]

    monkeypatch.setattr(command, "run_trial", trial)
    said: list[str] = []
    template = LocustRun(Path("chat.py"), slo=[parse_slo("ttft_p90_ms=1000")])
    code = command.tune(CapacityOptions(), TuneOptions(), template, None, ["--max-num-seqs=2"], tmp_path, said.append)
    assert code == 0
    (run_dir,) = tmp_path.iterdir()
    doc = Tune.read(run_dir / "tune.json")
    assert doc.steps[0].verdict == "adopted" and doc.steps[0].limit_after is None
    assert doc.final is not None and doc.final.limit is None and doc.final.vllm_args == ["--max-num-seqs=8"]
    assert (doc.stopped or "").startswith("the knee of --max-num-seqs=8 was not located (--max-duration (68 s)")
    assert "limit unknown." in markdown(doc) and "outside_engine" not in markdown(doc)
