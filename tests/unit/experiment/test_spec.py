"""The experiment file is checked whole before anything starts: each problem with its line and field."""

from pathlib import Path

import pytest

from loadwatch import assets
from loadwatch.cli import main
from loadwatch.experiment.cells import blocks, cell_run, cells, workload_flags
from loadwatch.experiment.pace import Pace
from loadwatch.experiment.spec import ExperimentError, load
from loadwatch.loadrun.locust import LocustRun

GOOD = """\
name: trial
arms:
  off: {vllm_args: [--no-enable-prefix-caching]}
  on: {vllm_args: [--enable-prefix-caching]}
workloads:
  static: {dataset: agent, agent_prefix: static, max_tokens: 32, ignore_eos: true}
  mixed: {dataset: jsonl, dataset_path: prompts.jsonl}
load: {users: [2, 4], duration: 20s, warmup_requests: 3}
repeats: 2
slo: [ttft_p90_ms=1000]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trial.yaml"
    path.write_text(text)
    return path


def test_a_bad_file_names_each_problem_with_its_line_and_field(tmp_path):
    path = write(tmp_path, """\
name: trial
arms:
  external: {target: http://gpu:8000, vllm_args: [--enable-prefix-caching]}
  local: {restart: systemctl restart vllm}
workloads:
  bad:
    dataset: nope
    max_tokens: -1
  reserved: {results_json: x.json, colour: red}
load: {users: [0], duration: 4x}
""")
    with pytest.raises(ExperimentError) as caught:
        load(path)
    lines = str(caught.value).splitlines()
    assert lines == [
        f"{path}:3: arms.external: vllm_args, replicas and router_policy are for the embedded engine: an arm "
        "with a target configures its server itself (restart)",
        f"{path}:4: arms.local: restart is for an arm with a target: the embedded engine restarts by itself",
        f"{path}:7: workloads.bad.dataset: 'nope' is none of builtin, sharegpt, random, random-mm, "
        "prefix-repetition, agent, jsonl, sessions, trace",
        f"{path}:8: workloads.bad.max_tokens: Input should be greater than 0",
        f"{path}:9: workloads.reserved.colour: not a load-generator option (see `locust --help`, with - as _)",
        f"{path}:9: workloads.reserved.results_json: set by the experiment itself (its load, slo and files)",
        f"{path}:10: load.duration: not a duration: '4x' (e.g. 40s, 2m)",
        f"{path}:10: load.users: users must be at least 1",
    ]


def test_arms_named_on_and_off_stay_names_and_the_baseline_must_be_an_arm(tmp_path):
    experiment = load(write(tmp_path, GOOD))
    assert list(experiment.arms) == ["off", "on"] and experiment.baseline == "off"
    with pytest.raises(ExperimentError, match=r":1: baseline: 'nope' is not one of the arms: off, on"):
        load(write(tmp_path, "baseline: nope\n" + GOOD))


@pytest.mark.parametrize("text, problem", [
    ("- a list\n", "an experiment is a mapping"),
    ("name: [unclosed\n", "not YAML"),
])
def test_a_file_that_is_no_experiment_at_all_is_said_so(tmp_path, text, problem):
    with pytest.raises(ExperimentError, match=problem):
        load(write(tmp_path, text))


def test_cells_go_round_by_round_the_arms_in_turn_and_each_has_its_folder_and_run_name(tmp_path):
    experiment = load(write(tmp_path, GOOD.replace("repeats: 2", "repeats: 3")))
    plan = cells(experiment)
    assert len(plan) == 2 * 2 * 2 * 3
    # Each arm's repeats spread over the experiment, a start of its engine each: A B, B A, A B.
    assert [(arm, [c.repeat for c in block]) for arm, block in blocks(plan)] == [
        ("off", [1] * 4), ("on", [1] * 4), ("on", [2] * 4), ("off", [2] * 4), ("off", [3] * 4), ("on", [3] * 4)]
    assert len(set(plan)) == len(plan)
    first = plan[0]
    assert str(first.folder) == "off/static/2-users/r1"
    assert first.run_name("trial") == "trial.off.static.2-users.r1"


def test_a_cell_runs_its_workload_load_and_name_on_locust(tmp_path):
    experiment = load(write(tmp_path, GOOD))
    cell = cells(experiment)[-1]
    template = LocustRun(Path("chat.py"), metrics_port=9999)
    joined = " ".join(cell_run(experiment, cell, template, tmp_path / "r.json", tmp_path).command())
    assert "--dataset jsonl --dataset-path " + str(tmp_path / "prompts.jsonl") in joined
    assert "-u 4 -r 4 -t 20s --warmup-requests 3" in joined and "--metrics-port 9999" in joined
    # A server whose requests take 2 s (3 s with the margin): 4 users need 15 s to complete 20 of
    # them, plus 3 s for the last; the 20 s asked for will do.
    slow = cell_run(experiment, cell, template, tmp_path / "r.json", tmp_path, Pace(2.0, 4))
    assert slow.load is not None and slow.load.duration == 20 and slow.stop_timeout == 10
    slower = cell_run(experiment, cell, template, tmp_path / "r.json", tmp_path, Pace(4.0, 2))
    assert slower.load is not None and slower.load.duration == 36 and slower.stop_timeout == 10
    assert "--run-name trial.off.mixed.4-users.r2" in joined and "--slo=ttft_p90_ms=1000" in joined
    assert workload_flags({"ignore_eos": True, "temperature": 0.5, "sweep": [1, 2]}, tmp_path) == [
        "--ignore-eos", "--temperature", "0.5", "--sweep", "1,2"]


@pytest.mark.parametrize("name", ["prefix-caching", "chunked-prefill"])
def test_the_shipped_experiments_are_valid(name):
    assert load(assets.experiment(name)).repeats == 3


def test_check_prints_the_plan_and_runs_nothing(tmp_path, capsys):
    assert main(["experiment", "prefix-caching", "--check", "--repeats", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 arms x 2 workloads x 1 levels x 2 repeats = 8 cells" in out and "scrape interval" not in out
    assert not any(tmp_path.iterdir())


def test_a_cool_down_under_the_scrape_interval_is_named(tmp_path, capsys):
    """A counter's increase needs two scrapes: a 1 s cool-down at a 5 s scrape interval left the
    engine's counters n/a in most cells (the e2e experiment's prefix-cache hit ratio, on a busy machine)."""
    assert main(["experiment", "prefix-caching", "--check", "--cool-down", "1s", "--out", str(tmp_path)]) == 0
    assert "cool-down of 1 s is under the stack's 5 s scrape interval" in capsys.readouterr().out


def test_a_bad_file_exits_2_before_anything_starts(tmp_path, capsys):
    path = write(tmp_path, GOOD.replace("users: [2, 4]", "users: [two]"))
    assert main(["experiment", str(path), "--out", str(tmp_path / "runs")]) == 2
    out = capsys.readouterr().out
    assert f"{path}:8: load.users.0:" in out and "Traceback" not in out
    assert not (tmp_path / "runs").exists()


def test_a_capacity_search_is_one_cell_per_arm_and_workload_and_needs_an_slo(tmp_path):
    searching = GOOD.replace("load: {users: [2, 4], duration: 20s, warmup_requests: 3}",
                             "load: {capacity: {mode: rate, level_duration: 10s}}")
    plan = cells(load(write(tmp_path, searching)))
    assert [str(c.folder) for c in plan] == ["off/static/capacity", "off/mixed/capacity", "on/static/capacity",
                                             "on/mixed/capacity"]
    assert plan[0].unit == "req/s"
    with pytest.raises(ExperimentError, match="a capacity search needs at least one slo"):
        load(write(tmp_path, searching.replace("slo: [ttft_p90_ms=1000]\n", "")))


def test_workloads_that_embed_and_generate_cannot_share_an_engine(tmp_path):
    mixed = GOOD.replace("mixed: {dataset: jsonl, dataset_path: prompts.jsonl}",
                         "mixed: {dataset: jsonl, dataset_path: prompts.jsonl, endpoint: embeddings}")
    with pytest.raises(ExperimentError, match="one engine cannot both generate and embed"):
        load(write(tmp_path, mixed))
    embedding = mixed.replace("static: {dataset: agent, agent_prefix: static, max_tokens: 32, ignore_eos: true}",
                              "static: {dataset: random, endpoint: rerank}")
    assert load(write(tmp_path, embedding)).endpoints == {"embeddings", "rerank"}


def test_an_arm_may_run_on_a_fleet_of_its_own_or_with_its_own_router_policy():
    import pytest as _pytest

    from loadwatch.experiment.command import arm_fleet
    from loadwatch.experiment.spec import Arm
    from loadwatch.fleet.options import FleetOptions

    assert arm_fleet(Arm(), None) is None
    assert arm_fleet(Arm(), FleetOptions(replicas=2)) == FleetOptions(replicas=2)
    mine = arm_fleet(Arm(replicas=3, router_policy="cache_aware"), FleetOptions(replicas=2, router_arg=["--x"]))
    assert (mine.replicas, mine.router_policy, mine.router_arg) == (3, "cache_aware", ["--x"])
    with _pytest.raises(ValueError, match="router_policy are for the embedded engine"):
        Arm(target="http://gpu:8000", router_policy="cache_aware")
