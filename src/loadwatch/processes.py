"""Background servers started by loadwatch (vLLM, the sidecar, Prometheus, Alertmanager):
started detached with a log, awaited until they answer, their state saved, stopped by process group."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from loadwatch import loopback
from loadwatch.atomic import write_atomically
from loadwatch.credentials import SECRET_VARIABLES
from loadwatch.defaults import LOOPBACK
from loadwatch.interrupts import held


class ComponentError(Exception):
    """A background server did not start or died; the message carries the end of its log."""


class PortTaken(ComponentError):
    """Another process answered on the server's port: the server could not bind it, and what answered
    is not what was started. `saying` words it with the remedy the caller knows (a stack's setting)."""

    def __init__(self, name: str, port: int, holder: str):
        self.name, self.port, self.holder = name, port, holder
        super().__init__(self.saying("start it again on another port"))

    def saying(self, remedy: str) -> str:
        return (f"{self.name}: port {self.port} is held by another process, {self.holder}, which answered "
                f"in its place; stop that process, or {remedy}")


@dataclass
class Component:
    name: str
    pid: int
    url: str  # where it is reached
    log: str

    def alive(self) -> bool:
        return alive(self.pid)


def port_or_free(preferred: int = 0, avoid: Collection[int] = ()) -> int:
    """The preferred port on LOOPBACK when it is free, else any free one; never one of `avoid` (ports
    that another stack has claimed but whose server has not bound them yet)."""
    candidates = (preferred, 0) if preferred and preferred not in avoid else (0,)
    for port in candidates:
        for _ in range(100):  # the kernel may hand out a claimed port that is still free
            with socket.socket() as s:
                try:
                    s.bind((LOOPBACK, port))
                except OSError:
                    break
                chosen = s.getsockname()[1]
            if chosen not in avoid:
                return chosen
            if port:
                break
    raise OSError(f"no free port on {LOOPBACK}")


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
        with loopback.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def port_holder(url: str, ours: Collection[int]) -> str | None:
    """Who listens where `url` is reached when none of the processes `ours` does: "pid 123 (its
    command line)", or "a process of another user" where the listener's process cannot be seen;
    None where one of ours listens (it bound the port, so it is what answers), or where no listener
    can be seen at all (nothing is known against the server). One scan of the machine's TCP
    sockets: some milliseconds, once per server started."""
    # psutil here, not at the top: the sidecar's image imports this module (cli's light commands) and
    # carries only the sidecar's dependencies (exporters/requirements.lock), psutil not among them.
    import psutil

    address = urlsplit(url)
    # The wildcards answer the host's address too; the host's own listener first, as the likeliest to answer.
    reached = [address.hostname, f"::ffff:{address.hostname}", "0.0.0.0", "::"]
    try:
        listening = sorted(((reached.index(c.laddr.ip), c.pid) for c in psutil.net_connections("tcp")
                            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == address.port
                            and c.laddr.ip in reached), key=lambda rank_pid: rank_pid[0])
    except psutil.Error:  # not allowed to look (not on Linux): nothing known against the server
        return None
    pids = [pid for _, pid in listening]
    if not pids or any(pid in ours for pid in pids):
        return None
    known = [pid for pid in pids if pid is not None]
    return f"pid {known[0]} ({_command_line(known[0])})" if known else "a process of another user"


def _command_line(pid: int, width: int = 100) -> str:
    import psutil  # as port_holder's

    try:
        line = " ".join(psutil.Process(pid).cmdline()) or psutil.Process(pid).name()
    except psutil.Error:
        return "ended since"
    return line if len(line) <= width else line[:width - 1] + "…"


def _family(pid: int) -> set[int]:
    """The process and its descendants: a server may listen from a child (a wrapper, a worker)."""
    import psutil  # as port_holder's

    try:
        return {pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))}
    except psutil.Error:
        return {pid}


def log_tail(path: str | Path, lines: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# An unindented exception line of a Python traceback: `ValueError: ...`, `pydantic_core....Error: ...`.
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*:")


class FlagsRefused(ComponentError):
    """The server refused its own flags as it started (vLLM validates them with pydantic): bad input,
    said in one line, not a server that failed."""


# pydantic's words for a refused field: the field's name on one line, its message (and the value given)
# on the next, indented.
_REFUSED = re.compile(r"ValidationError: \d+ validation errors? for (\w+)\n(\S+)\n\s+(.+?)"
                      r"(?: \[type=[^,\]]+(?:, input_value=(.+?))?(?:, input_type=\w+)?\])?$", re.MULTILINE)


def refused_flag(path: str | Path) -> str | None:
    """What the server's log says of a flag it refused, in one line (`data_parallel_size: Input should
    be greater than or equal to 1, given 0`), or None where it refused none."""
    found = _REFUSED.search(log_tail(path, 60))
    if found is None:
        return None
    _, field, message, given = found.groups()
    return f"{field}: {message}" + (f", given {given}" if given else "")


def why_it_exited(path: str | Path) -> str:
    """The end of a server's log from the last exception it raised: its own words for why it did not
    start (vLLM refusing a flag ends in pydantic's ValidationError and the field's message), not the
    traceback's frames above them; the log's tail where it raised none."""
    tail = log_tail(path, 60).splitlines()
    raised = [i for i, line in enumerate(tail) if _RAISED.match(line)]
    return "\n".join(tail[raised[-1]:][:8]) if raised else "\n".join(tail[-25:])


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


def write_state(path: Path, data: object) -> None:
    """A state file, whole or not at all: a reader never sees half of it."""
    write_atomically(path, json.dumps(data, indent=2))


def without_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in environ.items() if name not in SECRET_VARIABLES}


def start(name: str, command: list[str], url: str, ready_path: str, log: Path, timeout: float,
          env: dict[str, str] | None = None, on_spawn: Callable[[Component], None] | None = None,
          on_wait: Callable[[float], None] | None = None, cpus: set[int] | None = None) -> Component:
    """Start a server in a session of its own and wait until `url + ready_path` answers 200.

    `on_spawn` runs as soon as the process exists (to save its PID before the wait), `on_wait`
    about every ten seconds of waiting with the seconds waited. ComponentError, with the end of
    the log, when it exits or is not ready within `timeout`; then, or when interrupted, it is stopped.
    """
    started: Spawned | None = None
    try:
        with held():  # an interrupt waits until on_spawn has the PID
            started = spawn(name, command, url, log, env, cpus)
            if on_spawn is not None:
                on_spawn(started.component)
        _await_ready(started.component, started.process, ready_path, started.log, timeout, on_wait)
    except BaseException:
        if started is not None:
            stop_group(started.component.pid, 20.0)
        raise
    return started.component


@dataclass
class Spawned:
    component: Component
    process: subprocess.Popen
    log: Path


def spawn(name: str, command: list[str], url: str, log: Path, env: dict[str, str] | None = None,
          cpus: set[int] | None = None) -> Spawned:
    """The server's process, started detached with its log and without loadwatch's secrets; not yet
    awaited (await_ready), so that servers that do not need each other start side by side. An
    interrupt while it starts stops it; a caller that records it holds interrupts around both."""
    log.parent.mkdir(parents=True, exist_ok=True)
    process: subprocess.Popen | None = None
    try:
        # Appended to: a server started again on the same folder (an experiment's arm, round after
        # round) keeps the log of its earlier starts.
        with open(log, "a") as out, held():
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**without_secrets(os.environ), **(env or {})},
                                       preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    except FileNotFoundError:
        raise ComponentError(f"{name}: {command[0]} is not installed") from None
    except KeyboardInterrupt:
        if process is not None:
            stop_group(process.pid, 20.0)
        raise
    return Spawned(Component(name, process.pid, url, str(log)), process, log)


def await_ready(started: Spawned, ready_path: str, timeout: float,
                on_wait: Callable[[float], None] | None = None) -> None:
    """Until the server answers 200 at `ready_path`; ComponentError when it exits or is not ready
    within `timeout`, and then it is stopped (as when the wait is interrupted)."""
    try:
        _await_ready(started.component, started.process, ready_path, started.log, timeout, on_wait)
    except BaseException:
        stop_group(started.component.pid, 20.0)
        raise


def _await_ready(component: Component, process: subprocess.Popen, ready_path: str, log: Path, timeout: float,
                 on_wait: Callable[[float], None] | None) -> None:
    name, url = component.name, component.url
    started = time.monotonic()
    next_note = 10.0
    while not answers(url + ready_path):
        if process.poll() is not None:
            if (refused := refused_flag(log)) is not None:
                raise FlagsRefused(f"{name} refused its flags: {refused} (its log: {log})")
            raise ComponentError(f"{name} exited with code {process.returncode} while starting; "
                                 f"end of {log}:\n{why_it_exited(log)}")
        waited = time.monotonic() - started
        if waited > timeout:
            raise ComponentError(f"{name} was not ready at {url + ready_path} within {timeout:.0f} s; "
                                 f"end of {log}:\n{log_tail(log)}")
        if on_wait is not None and waited >= next_note:
            on_wait(waited)
            next_note += 10.0
        time.sleep(0.3)
    # A 200 is not enough: another process that took the port between its choice and this start
    # (another home's stack restarting its sidecar on 9647) answers it while ours fails to bind, and
    # the run would measure, or scrape, that other one.
    holder = port_holder(url, _family(process.pid))
    if holder is not None:
        raise PortTaken(name, urlsplit(url).port or 0, holder)
