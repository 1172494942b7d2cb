"""`--processes auto`: one Locust process per core this one may use, leaving the rest of the stack room.

A Locust process runs its users on one core (gevent), so a load generator short of cores adds its
own delay to every figure. The cores a process may use are its CPU affinity, cut to its container's
CPU quota (cgroup v2 `cpu.max`), which a Kubernetes CPU limit sets while the affinity still shows
the whole node.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

AUTO = "auto"
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def usable_cores(cpu_max: Path = CPU_MAX) -> int:
    cores = len(os.sched_getaffinity(0))
    try:
        quota, period = cpu_max.read_text().split()
    except (OSError, ValueError):
        return cores
    if quota == "max":
        return cores
    return max(1, min(cores, math.floor(int(quota) / int(period))))


def auto_processes(worker: bool, cores: int) -> int:
    """A worker-only process (`--worker`: its master is elsewhere) takes every core; a master that
    forks its own workers leaves one to itself and to what shares the host (the server under test,
    the sidecar, Prometheus)."""
    return cores if worker else max(1, cores - 1)


def processes_type(worker: bool):
    """The type of Locust's --processes: a number as before, or `auto`."""

    def processes(text: str) -> int:
        if text.strip().lower() == AUTO:
            return auto_processes(worker, usable_cores())
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--processes takes a number or `{AUTO}`, not {text!r}") from None

    return processes


def accept_auto(parser: argparse.ArgumentParser, worker: bool) -> None:
    """Locust's own --processes takes `auto` too (on the command line, LOCUST_PROCESSES or locust.conf)."""
    for action in parser._actions:
        if action.dest == "processes":
            action.type = processes_type(worker)
            action.help = (f"{action.help} `{AUTO}`: one per core this process may use (its affinity and CPU "
                           "quota), less one for the master and the stack unless --worker")
