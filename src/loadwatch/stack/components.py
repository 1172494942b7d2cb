"""Processes of the stack: started detached with a log, awaited until ready, stopped by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path


class StackError(Exception):
    """A component did not start or died; the message carries the end of its log."""


@dataclass
class Component:
    name: str
    pid: int
    url: str  # where it is reached
    log: str

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:  # reap it if it is our own dead child
            return os.waitpid(self.pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return True


def port_or_free(preferred: int) -> int:
    """The default port when it is free, else any free one."""
    for port in (preferred, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise StackError("no free port")


def log_tail(path: str | Path, lines: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start(name: str, command: list[str], url: str, ready_path: str, log_dir: Path, timeout: float,
          env: dict[str, str] | None = None) -> Component:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    try:
        with open(log, "w") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**os.environ, **(env or {})})
    except FileNotFoundError:
        raise StackError(f"{name}: {command[0]} is not installed") from None
    component = Component(name, process.pid, url, str(log))
    deadline = time.monotonic() + timeout
    while not ready(url + ready_path):
        if process.poll() is not None:
            raise StackError(f"{name} exited with code {process.returncode} while starting; "
                             f"end of {log}:\n{log_tail(log)}")
        if time.monotonic() > deadline:
            stop(component)
            raise StackError(f"{name} was not ready at {url + ready_path} within {timeout:.0f} s; "
                             f"end of {log}:\n{log_tail(log)}")
        time.sleep(0.3)
    return component


def stop(component: Component, grace: float = 20.0) -> None:
    try:
        os.killpg(component.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while component.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    if component.alive():
        os.killpg(component.pid, signal.SIGKILL)
