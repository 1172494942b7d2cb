"""Background servers started by loadwatch (vLLM, the sidecar, Prometheus, Alertmanager):
their ports, liveness, HTTP readiness, logs, and stopping them by process group."""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.request
from pathlib import Path


def port_or_free(preferred: int = 0) -> int:
    """The preferred port on 127.0.0.1 when it is free, else any free one."""
    for port in (preferred, 0) if preferred else (0,):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError("no free port on 127.0.0.1")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # reap it if it is our own dead child, or it lingers as a zombie
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def answers(url: str) -> bool:
    """Whether the URL answers 200 within 2 s."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def log_tail(path: str | Path, lines: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_group(pid: int, grace: float) -> None:
    """SIGTERM the process group started with start_new_session, SIGKILL it after `grace` seconds."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
