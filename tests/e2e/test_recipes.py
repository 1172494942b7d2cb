"""The recipes of the docs' main paths that run on the embedded engine, run as a reader copies them:
each command of the page's block in order, from a folder that holds the checkout's `.venv` and
`locustfiles` as the reader's does, each exit code as the page says. The one change: the engine's
port 8000 is a free port, since the tier beside this one may hold 8000.

The recipes that need minutes of search (capacity, tune) or a cluster run in tests of their own: the
README's `make run` in tests/e2e/test_capacity.py, the GitHub workflow's steps in
tests/integration/test_ci_workflow_runs.py."""

from __future__ import annotations

import subprocess

from tests.conftest import REPO, free_port
from tests.docs_blocks import recipe

DOCS = REPO / "docs"


def run_recipe(commands: list[str], folder, timeout: float = 600) -> list[tuple[int, str]]:
    """Each command in bash from `folder`, in order: its exit code and its output."""
    for shared in (".venv", "locustfiles"):
        (folder / shared).symlink_to(REPO / shared)
    port = str(free_port())
    done = []
    for command in commands:
        command = command.replace("--port 8000", f"--port {port}").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        ran = subprocess.run(["bash", "-c", command], cwd=folder, capture_output=True, text=True, timeout=timeout)
        done.append((ran.returncode, ran.stdout + ran.stderr))
        print(f"$ {command}\n{ran.stdout}{ran.stderr}exit {ran.returncode}\n")
    return done


def test_the_ci_page_gate_passes_a_release_and_fails_one_with_a_single_batch_slot(tmp_path):
    commands = recipe(DOCS / "guides" / "ci.md", ".venv/bin/loadwatch engine start")
    try:
        done = run_recipe(commands, tmp_path)
    finally:
        subprocess.run([str(REPO / ".venv" / "bin" / "loadwatch"), "engine", "stop"], capture_output=True, timeout=60)
    codes = [code for code, _ in done]
    assert codes == [0, 0, 0, 0, 3, 3, 0], "\n".join(output[-2000:] for _, output in done)
    assert "SLO ttft_p99_ms: met" in done[1][1] and "SLO ttft_p99_ms: BROKEN" in done[4][1]
    assert "FAIL: ttft_p99_ms of this" in done[5][1] and "## Gate" in (tmp_path / "compare.md").read_text()
    assert not any("Traceback" in output for _, output in done)
