"""The CI gate of the docs, run as GitHub would run it: the `run:` steps of docs/ci/github-actions.yml,
in order, in bash, with the workflow's environment, against the test server. Two pipelines share the
state the workflow's cache keeps (`loadwatch-state/`): a release, then a release whose server answers
more slowly. The first keeps its run as the release to beat; the second fails at the compare step
(exit 3), still adds its run to the history, and leaves the release as it was.

What GitHub itself does is stood in for, and only that: the cache is a folder both pipelines see,
`pip install "$LOADWATCH_PIP"` is this checkout's virtual environment on PATH (tests/integration/
test_wheel.py installs the wheel), and a step's `if:` is judged from a table of the conditions the
workflow uses (a new condition fails here, to be added). The load test's `-t 2m` runs 8 s here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

WORKFLOW = REPO / "docs" / "ci" / "github-actions.yml"
BIN = Path(sys.executable).parent
KEY = "ci-key-0123"

# A step's `if:` as GitHub judges it, from whether a step before it failed and what the push was.
CONDITIONS = {
    None: lambda failed, tag: not failed,
    "${{ !cancelled() }}": lambda failed, tag: True,
    "${{ success() && startsWith(github.ref, 'refs/tags/') }}": lambda failed, tag: not failed and tag,
}


def pipeline(workspace: Path, server_url: str, tag: str) -> dict[str, int]:
    """Each `run:` step of the workflow in order, as a fresh checkout would run it; its exit codes by
    step (a step its `if:` skipped is absent)."""
    for made in ("run", "compare.md", "history.html"):  # a fresh checkout has none of a run's outputs
        subprocess.run(["rm", "-rf", str(workspace / made)], check=True)
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["gate"]
    env = {**os.environ, **{k: v for k, v in job["env"].items() if "${{" not in v},
           "PATH": f"{BIN}:{os.environ['PATH']}", "LABEL": tag, "VLLM_URL": server_url, "OPENAI_API_KEY": KEY,
           "LOCUST_METRICS_PORT": "0"}  # the tier beside this one may hold the default port
    codes: dict[str, int] = {}
    for number, step in enumerate(job["steps"]):
        script = step.get("run")
        if script is None or script.startswith("pip install"):
            continue
        condition = step.get("if")
        assert condition in CONDITIONS, f"add the condition {condition!r} to CONDITIONS"
        if not CONDITIONS[condition](any(codes.values()), True):
            continue
        script = script.replace(" -t 2m ", " -t 8s ")
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=workspace, env=env,
                              capture_output=True, text=True, timeout=300)
        assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
        codes[step.get("name", f"step {number}")] = done.returncode
        if done.returncode and done.returncode != 3:
            said = done.stdout[-3000:] + done.stderr[-3000:]
            raise AssertionError(f"{step.get('name')}: exit {done.returncode}\n{said}")
    return codes


def test_the_workflow_keeps_a_release_then_fails_a_slower_one_at_compare(fake_server, tmp_path):
    served = ("--tokens", "60", "--itl", "0.01", "--max-model-len", "4096", "--authorization", f"Bearer {KEY}")
    fast = fake_server("--ttft", "0.05", *served)
    first = pipeline(tmp_path, fast.url, "v1.0.0")
    assert first == {"Load test": 0, "Against the last release": 0, "Against the history": 0,
                     "Keep this run as the release to beat": 0}, first
    release = tmp_path / "loadwatch-state" / "release" / "results.json"
    kept = release.read_bytes()

    slow = fake_server("--ttft", "0.15", *served)
    second = pipeline(tmp_path, slow.url, "v1.1.0")
    assert second == {"Load test": 0, "Against the last release": 3, "Against the history": 0}, second
    assert "- FAIL: ttft_p99_ms of this +" in (tmp_path / "compare.md").read_text()  # the job's artifact says why
    assert release.read_bytes() == kept  # the slower release is not the one to beat
    listed = subprocess.run([str(BIN / "loadwatch"), "history", "loadwatch-state/history.db", "-o", "history.html"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    page = (tmp_path / "history.html").read_text()
    assert "v1.0.0" in page and "v1.1.0" in page, listed.stdout + listed.stderr
