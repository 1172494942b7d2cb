"""Processes of the stack: started detached with a log, awaited until ready, stopped by PID."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from loadwatch.processes import alive, answers, log_tail, stop_group


class StackError(Exception):
    """A component did not start or died; the message carries the end of its log."""


@dataclass
class Component:
    name: str
    pid: int
    url: str  # where it is reached
    log: str

    def alive(self) -> bool:
        return alive(self.pid)


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
    while not answers(url + ready_path):
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
    stop_group(component.pid, grace)
