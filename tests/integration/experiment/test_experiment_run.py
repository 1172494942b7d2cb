"""`loadwatch experiment` against servers of known timing (arms with a target): every cell a run
folder with its report, a restart command run before its arm, an arm that cannot start skipped
with its reason, verdicts that see a real difference, and a Pareto plot across load levels."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import wait_for
from tests.fakes.grafana import FakeGrafana
from tests.pages import CHROMIUM, open_offline

pytestmark = pytest.mark.needs("prometheus")


def test_an_experiment_of_target_arms(fake_server, tmp_path):
    slow = fake_server("--ttft", "0.2", "--itl", "0.01", "--tokens", "8")
    fast = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "8")
    marker = tmp_path / "restarted"
    (tmp_path / "trial.yaml").write_text(f"""\
name: trial
repeats: 2
cool_down: 1
arms:
  slow: {{target: "{slow.url}"}}
  fast: {{target: "{fast.url}", restart: "echo fast > {marker}"}}
  broken: {{target: "http://127.0.0.1:1", restart: "exit 3"}}
workloads:
  builtin: {{dataset: builtin, max_tokens: 8}}
load: {{users: [1, 3], duration: 2s, warmup_run: 1s}}
""")
    grafana = FakeGrafana()
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home"), "GRAFANA_TOKEN": "glsa_test"}
    try:
        run = subprocess.run([sys.executable, "-m", "loadwatch.cli", "experiment", str(tmp_path / "trial.yaml"),
                              "--out", str(tmp_path / "runs"), "--grafana-url", grafana.url],
                             capture_output=True, text=True, timeout=400, env=env)
    finally:
        grafana.close()
    output = run.stdout + run.stderr
    assert run.returncode == 1, output  # the broken arm's cells failed
    regions = [a for a in grafana.posted if "run" in a["tags"]]
    assert len(regions) == 8 and all(a["timeEnd"] > a["time"] for a in regions)
    assert any("trial.fast.builtin.3-users.r2-" in tag for a in regions for tag in a["tags"])
    assert "cell 1 of 12: slow/builtin/1-users/r1 (1 users)" in output and "Traceback" not in output
    assert "arm broken did not start, its 4 cells are skipped: the restart command exited with 3" in output
    assert marker.read_text() == "fast\n"
    (exp_dir,) = (tmp_path / "runs").iterdir()
    assert exp_dir.name.endswith("-trial") and (exp_dir / "experiment.yaml").exists()

    warmed = json.loads((exp_dir / "slow" / "builtin" / "warmup" / "r1" / "results.json").read_text())
    assert warmed["run_id"].startswith("trial.slow.builtin.1-users.warmup-")  # run, and left out of the summary
    cell = exp_dir / "fast" / "builtin" / "3-users" / "r2"
    results = json.loads((cell / "results.json").read_text())
    assert results["run_id"].startswith("trial.fast.builtin.3-users.r2-") and results["completed"] > 0
    assert results["records"] == "results.requests.jsonl" and (cell / "report.md").exists()

    summary = json.loads((exp_dir / "summary.json").read_text())
    verdict = {(r["arm"], r["level"], r["metric"]): r for r in summary["rows"]}
    for users in (1, 3):
        ttft = verdict[("fast", users, "median_ttft_ms")]
        assert ttft["verdict"] == "better" and ttft["ci_high"] < -50, ttft
        assert ttft["method"] == "runs"
    assert summary["pareto"] == "pareto.png" and (exp_dir / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    assert any("no /reset_prefix_cache" in n for n in summary["notes"])
    assert any("broken/builtin/1-users/r1: the arm did not start" in n for n in summary["notes"])
    text = (exp_dir / "summary.md").read_text()
    assert "| fast | builtin | 3 users | 2 |" in text and "## Against slow" in text
    assert "2 runs each of 2 s" in text or "(asked 2 s: stretched" in text  # as they ran, never a length they did not
    # The fake servers export no vLLM metrics: the engine's columns are n/a, and the notes say why.
    assert "slow / builtin: its prefix-cache, KV cache and preemption columns read n/a: The engine's side" in text
    page = (exp_dir / "summary.html").read_text()  # the same, one file: its plot inlined, each cell linked
    assert "<table>" in page and 'src="data:image/png;base64,' in page
    assert '<a href="fast/builtin/3-users/r2/report.html">' in page and (cell / "report.html").is_file()
    assert "broken/builtin/1-users/r1: no report" in page
    if CHROMIUM:  # as a person opens it: the plot shown, every cell's page there to follow
        drawn = open_offline(exp_dir / "summary.html")
        assert not drawn["errors"] and drawn["images"] == [True]
        assert all((exp_dir / link).is_file() for link in drawn["links"]) and len(drawn["links"]) == 8

    # Two runs of one arm against a server of fixed timing: no change worth the name. Not the verdict
    # `same`: with one run a side the interval is a bootstrap over one run's requests, blind to what
    # differs between runs (the README says so), and on a busy machine two runs' medians differ by
    # a millisecond or two, which it calls a change now and then.
    same = exp_dir / "fast" / "builtin" / "3-users"
    compared = subprocess.run([sys.executable, "-m", "loadwatch.cli", "compare", f"r1={same / 'r1'}",
                               f"r2={same / 'r2'}", "--json", str(tmp_path / "aa.json")],
                              capture_output=True, text=True, timeout=60)
    rows = {r["metric"]: r for r in json.loads((tmp_path / "aa.json").read_text())["rows"]}
    assert rows["median_ttft_ms"]["method"] == "requests" and abs(rows["median_ttft_ms"]["change_pct"]) < 10, \
        compared.stdout


def test_a_capacity_search_per_arm(fake_server, tmp_path):
    """Two servers alike but for how many streams they serve at once: each arm's search finds its own."""
    two = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "10", "--max-concurrency", "2")
    six = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "10", "--max-concurrency", "6")
    (tmp_path / "search.yaml").write_text(f"""\
name: search
arms:
  two-streams: {{target: "{two.url}"}}
  six-streams: {{target: "{six.url}"}}
workloads:
  builtin: {{max_tokens: 10}}
slo: [ttft_p90_ms=150]
load:
  capacity: {{mode: users, start: 2, level_duration: 2s, warmup: 0.5s, cool_down: 0.5s}}
""")
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    run = subprocess.run([sys.executable, "-m", "loadwatch.cli", "experiment", str(tmp_path / "search.yaml"),
                          "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=400, env=env)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    (exp_dir,) = (tmp_path / "runs").iterdir()
    found = {c["arm"]: c for c in json.loads((exp_dir / "summary.json").read_text())["capacity"]}
    assert 1 <= found["two-streams"]["max_sustainable"] < found["six-streams"]["max_sustainable"], found
    assert found["six-streams"]["unit"] == "users" and found["two-streams"]["limit"] == "slo_only"
    assert (exp_dir / "two-streams" / "builtin" / "capacity" / "capacity.json").exists()
    assert "## Capacity" in (exp_dir / "summary.md").read_text()
    assert (exp_dir / "two-streams" / "builtin" / "capacity" / "report.html").is_file()
    assert '<a href="six-streams/builtin/capacity/report.html">' in (exp_dir / "summary.html").read_text()


def test_an_interrupted_experiment_keeps_its_finished_cells_and_summarises_them(fake_server, tmp_path):
    server = fake_server("--ttft", "0.02", "--itl", "0.01", "--tokens", "4")
    (tmp_path / "stop.yaml").write_text(f"""\
name: stop
repeats: 5
cool_down: 0
arms:
  only: {{target: "{server.url}"}}
workloads:
  builtin: {{max_tokens: 4}}
load: {{users: 1, duration: 2s, warmup_run: 0s}}
""")
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    experiment = subprocess.Popen([sys.executable, "-m", "loadwatch.cli", "experiment", str(tmp_path / "stop.yaml"),
                                   "--out", str(tmp_path / "runs")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env=env)
    first = None
    try:
        first = wait_for(lambda: next((tmp_path / "runs").glob("*/only/builtin/r2/locust.log"), None), 90,
                         "the second cell to start")
        experiment.send_signal(signal.SIGTERM)  # as Ctrl-C: loadwatch treats both alike
        output, _ = experiment.communicate(timeout=90)
    finally:
        if experiment.poll() is None:
            experiment.kill()
    assert experiment.returncode == 130, output
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    done = [c for c in summary["cells"] if c["results"]]
    assert first is not None and done and done[0]["folder"] == "only/builtin/r1"
    assert not list((tmp_path / "home" / "stacks").glob("*.json")), "the arm's stack is down"
