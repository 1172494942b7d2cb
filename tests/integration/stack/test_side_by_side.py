"""Stacks side by side on one load host (issue 40): each run folder owns its stack, and `loadwatch
down` stops the one named, or the only one, never another folder's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

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
