"""A stop that comes while loadwatch starts a process stops that process too. Python raises the
interrupt wherever the main thread is: inside `subprocess.Popen`, after the fork, it left the child
running with no one knowing its PID (a tune sent SIGTERM as a trial's Locust started exited with that
Locust still running). Here the child itself sends the stop from that very moment, before its exec."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from loadwatch import interrupts, processes
from loadwatch.loadrun import locust as locust_run
from loadwatch.loadrun.locust import INTERRUPTED, Load, LocustRun

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def pidfile(tmp_path, monkeypatch):
    """Where the child notes its PID. loadwatch's own handlers are in this process for the test,
    pytest's again after it, and a child the test found left running is killed."""
    saved = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    monkeypatch.setattr(interrupts, "_interrupted", False)
    monkeypatch.setattr(interrupts, "_pending", False)
    interrupts.catch_interrupts()
    path = tmp_path / "child.pid"
    yield path
    for number, handler in saved.items():
        signal.signal(number, handler)
    if path.exists() and not gone(path):
        os.kill(int(path.read_text()), signal.SIGKILL)


def stop_the_starter(pidfile: Path) -> None:
    """In the child, between fork and exec: its PID noted, then SIGTERM to loadwatch."""
    pidfile.write_text(str(os.getpid()))
    os.kill(os.getppid(), signal.SIGTERM)


def gone(pidfile: Path) -> bool:
    pid = int(pidfile.read_text())
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_stop_while_locust_starts_stops_that_locust(tmp_path, monkeypatch, pidfile):
    said: list[str] = []
    own = locust_run._interruptible
    monkeypatch.setattr(locust_run, "_interruptible", lambda: (own(), stop_the_starter(pidfile)))
    monkeypatch.setattr(LocustRun, "command", lambda self: SLEEPER)
    run = LocustRun(tmp_path / "locustfile.py", load=Load(users=1, duration=60), stop_timeout=1)
    try:
        finished = run.run("http://127.0.0.1:1", tmp_path / "locust.log", said.append)
    except KeyboardInterrupt:
        finished = None
    assert finished is not None and finished.code == INTERRUPTED, "the interrupt escaped the run"
    assert said and said[0].startswith("interrupted: letting Locust finish")
    assert gone(pidfile)


def test_a_stop_while_a_server_starts_stops_that_server(tmp_path, monkeypatch, pidfile):
    recorded: list[processes.Component] = []
    # The affinity is set in the child before its exec: the moment the stop is sent from.
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: stop_the_starter(pidfile))
    with pytest.raises(KeyboardInterrupt):
        processes.start("sleeper", SLEEPER, "http://127.0.0.1:1", "/", tmp_path / "sleeper.log", 60,
                        on_spawn=recorded.append, cpus={0})
    assert [c.pid for c in recorded] == [int(pidfile.read_text())]  # recorded before the stop came
    assert gone(pidfile)


def test_a_stop_inside_code_made_from_a_string_exits_130_not_by_sigint(tmp_path):
    """A SIGTERM whose KeyboardInterrupt ends code run from a string (as a dataclass or namedtuple is
    made, while a module is imported), caught and turned into exit 130: under `python -m`, CPython
    ended the process by SIGINT all the same (-2: a sidecar stopped as it started, once in CI)."""
    (tmp_path / "stopped_in_exec.py").write_text(
        "import sys\n"
        "from loadwatch.interrupts import catch_interrupts\n"
        "catch_interrupts()\n"
        "try:\n"
        "    exec('import os, signal\\nos.kill(os.getpid(), signal.SIGTERM)\\nfor _ in range(10**6): pass', {})\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
        "sys.exit(1)  # the stop never came\n")
    done = subprocess.run([sys.executable, "-m", "stopped_in_exec"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
