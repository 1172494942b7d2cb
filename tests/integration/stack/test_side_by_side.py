"""Stacks side by side on one load host (issue 40): each run folder owns its stack, and `loadwatch
down` stops the one named, or the only one, never another folder's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from loadwatch.report.history import History
from tests.conftest import get

pytestmark = [pytest.mark.needs("prometheus"), pytest.mark.needs("prometheus-alertmanager")]
CLI = [sys.executable, "-m", "loadwatch.cli"]


def components(run_dir: Path) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads((run_dir / "stack.json").read_text())["components"]}


def alive(parts: dict[str, dict]) -> list[bool]:
    return [psutil.pid_exists(c["pid"]) and psutil.Process(c["pid"]).status() != "zombie" for c in parts.values()]


def test_two_stacks_run_side_by_side_and_down_stops_only_the_one_named(fake_server, tmp_path):
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home")}
    runs = []
    try:
        for name in ("alice", "bob"):
            up = subprocess.run([*CLI, "up", "--target", fake_server().url, "--out", str(tmp_path / name),
                                 "--metrics-port", "0"], capture_output=True, text=True, timeout=120, env=env)
            assert up.returncode == 0, up.stdout + up.stderr
            runs.append(next((tmp_path / name).iterdir()))
            assert f"loadwatch down {runs[-1]}" in up.stdout
        alice, bob = runs
        parts = {r: components(r) for r in runs}  # read now: a stopped stack leaves no state
        ports = [{c["url"] for c in parts[r].values()} for r in runs]
        assert not ports[0] & ports[1], "each stack on ports of its own"

        ambiguous = subprocess.run([*CLI, "down"], capture_output=True, text=True, timeout=60, env=env)
        assert ambiguous.returncode == 2 and "several stacks run" in ambiguous.stdout, ambiguous.stdout
        assert f"loadwatch down {alice}" in ambiguous.stdout and f"loadwatch down {bob}" in ambiguous.stdout
        assert all(alive(parts[alice]) + alive(parts[bob])), "a down that names no stack stops none"

        named = subprocess.run([*CLI, "down", str(alice)], capture_output=True, text=True, timeout=60, env=env)
        assert named.returncode == 0 and f"stopped the stack of {alice}" in named.stdout, named.stdout
        assert not any(alive(parts[alice])) and not (alice / "stack.json").exists()
        assert all(alive(parts[bob])) and get(parts[bob]["prometheus"]["url"] + "/-/ready") is not None

        last = subprocess.run([*CLI, "down"], capture_output=True, text=True, timeout=60, env=env)
        assert last.returncode == 0 and f"stopped the stack of {bob}" in last.stdout, last.stdout
        assert not any(alive(parts[bob])) and not list((tmp_path / "home" / "stacks").glob("*.json"))
    finally:
        for run_dir in runs:
            subprocess.run([*CLI, "down", str(run_dir)], capture_output=True, timeout=60, env=env)


def test_two_runs_begun_together_with_default_ports_both_complete_and_a_third_folders_down_stops_neither(
        fake_server, tmp_path):
    """The collision a new user met (issue 48): two `loadwatch run`s from two folders, a second apart, each
    on its default ports. The second found the load generator's metrics port free (the first's Locust
    had not bound it yet) and died on it; now each claims its ports in its state before binding them."""
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home"), "LOADWATCH_STACK_FREE_PORTS": "false"}
    folders = [tmp_path / "alice", tmp_path / "bob", tmp_path / "carol"]
    for folder in folders:
        folder.mkdir()
    runs = []
    try:
        for folder in folders[:2]:
            # Both add their run to one history, as a team's CI jobs share one file.
            runs.append(subprocess.Popen([*CLI, "run", "--target", fake_server().url, "-u", "2", "-t", "12s",
                                          "--history", str(tmp_path / "team.db"), "--label", folder.name],
                                         cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                         env=env))
            time.sleep(1)  # the second chooses its ports before the first one's Locust binds its own
        deadline = time.monotonic() + 90
        while len(list((tmp_path / "home" / "stacks").glob("*.json"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        listing = subprocess.run([*CLI, "down"], cwd=folders[2], capture_output=True, text=True, timeout=60, env=env)
        assert listing.returncode == 2 and "several stacks run" in listing.stdout, listing.stdout
        for folder in folders[:2]:
            assert str(folder / "runs") in listing.stdout, listing.stdout
        outputs = [run.communicate(timeout=240)[0] for run in runs]
        for folder, run, output in zip(folders[:2], runs, outputs, strict=True):
            assert run.returncode == 0, output
            results = json.loads(next((folder / "runs").glob("*/results.json")).read_text())
            assert results["completed"] > 0 and results["failed"] == 0, results
            assert results["users"] == 2 and results["loadwatch_version"], results
            assert f"added: {folder.name} (" in output, output
        client_ports = [line.rsplit(":", 1)[1].split("/")[0] for output in outputs for line in output.splitlines()
                        if "load generator metrics:" in line]
        assert len(set(client_ports)) == 2, client_ports
        history = History(tmp_path / "team.db")
        assert sorted(e.label for e in history.entries()) == ["alice", "bob"]
        history.close()
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
