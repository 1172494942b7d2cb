"""A fleet's replica count changed during a command: capacity's search on one replica and then on
all (`--scaling`), tune's "one more replica" on a fleet of the user's own, and a run whose replicas
change while the load does (`--scale-at`).

The embedded fleet keeps all its replicas running and tells its router which of them to use (a
replica loads its model in minutes: an autoscaler's new pod does too, and the docs say the embedded
fleet leaves that time out). A fleet of the user's own is scaled by the user's command
(`--scale 'kubectl scale deployment/vllm --replicas={replicas}'`); loadwatch then waits until its
router lists that many replicas.
"""

from __future__ import annotations

import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.routers import RouterError
from loadwatch.fleet.schedule import SCALING, Schedule
from loadwatch.fleet.servers import Servers

REPLICAS = "{replicas}"  # where --scale's command takes the count
POLL_SECONDS = 2.0


class ScaleError(Exception):
    """The fleet did not reach the replica count asked for; the message says what it reached and why."""


def scale_command(template: str, replicas: int) -> str:
    return template.replace(REPLICAS, shlex.quote(str(replicas)))


@dataclass
class Scaler:
    """Sets the replica count of the fleet a stack runs against."""

    fleet: Servers
    command: str | None = None  # the user's --scale template; None for the embedded fleet
    timeout: float = FleetOptions.model_fields["scale_timeout"].default
    log: Path | None = None  # where the command's output goes
    # After the user's command: the stack reads the replicas the router lists now (stack.relist).
    relisted: Callable[[], None] | None = None

    @classmethod
    def of(cls, fleet: Servers, run_dir: Path) -> Scaler:
        """The scaler of the fleet a stack runs, as the command's fleet options asked (--scale and its
        timeout, kept in its scaling), its command's output in the run folder's scale.log."""
        return cls(fleet, fleet.scaling.command, fleet.scaling.timeout, run_dir / "scale.log")

    @property
    def embedded(self) -> bool:
        return self.command is None

    @property
    def most(self) -> int | None:
        """The most replicas it can serve from: the embedded fleet's started ones; None: the user's command's."""
        return len(self.fleet.replicas) if self.embedded else None

    def serving(self) -> list[str]:
        """The replicas' URLs its router sends to now."""
        return self.fleet.program.workers(self.fleet.url)

    def serving_names(self) -> list[str] | None:
        """The names of the replicas its router sends to now, as the stack knows them; None where it
        knows none of them by URL (replicas named by a pattern of fingerprints)."""
        listed = set(self.serving())
        names = [name for name, url in self.fleet.replicas.items() if url.rstrip("/") in listed]
        return names or None

    def scale_to(self, count: int, say) -> None:
        """`count` replicas serving, or ScaleError."""
        if count < 1:
            raise ScaleError(f"a fleet serves from one replica at least, not {count}")
        if self.most is not None and count > self.most:
            raise ScaleError(f"the embedded fleet has {self.most} replicas: start it with --replicas {count} "
                             "to scale to that many")
        say(f"fleet: scaling to {count} replica{'s' if count > 1 else ''}")
        try:
            if self.embedded:
                program = self.fleet.program
                urls = list(self.fleet.replicas.values())
                for url in urls[:count]:
                    program.add_worker(self.fleet.url, url)
                for url in urls[count:]:
                    program.remove_worker(self.fleet.url, url)
                self._await(count)
            else:
                self._run(count)
                self._await(count)
                if self.relisted:
                    self.relisted()
        except RouterError as exc:
            raise ScaleError(str(exc)) from None

    def _run(self, count: int) -> None:
        assert self.command is not None
        command = scale_command(self.command, count)
        out = open(self.log, "a") if self.log else subprocess.DEVNULL  # noqa: SIM115 (closed below)
        try:
            done = subprocess.run(command, shell=True, stdout=out, stderr=subprocess.STDOUT, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            raise ScaleError(f"--scale did not finish in {self.timeout:g} s: {command}") from None
        finally:
            if self.log:
                out.close()  # type: ignore[union-attr]
        if done.returncode != 0:
            raise ScaleError(f"--scale exited with {done.returncode}: {command}"
                             + (f" (its output: {self.log})" if self.log else ""))

    def _await(self, count: int) -> None:
        """Until the router lists `count` replicas: a new pod is listed once it is ready."""
        deadline = time.monotonic() + self.timeout
        listed: list[str] = []
        while time.monotonic() < deadline:
            listed = self.serving()
            if len(listed) == count:
                return
            time.sleep(POLL_SECONDS)
        raise ScaleError(f"the router lists {len(listed)} replicas after {self.timeout:g} s, not {count}: "
                         + (", ".join(listed) or "none"))


def scale_schedule(scaler: Scaler, plan: list[tuple[float, int]], run_dir: Path, say) -> Schedule[int]:
    """--scale-at's changes: each noted with its replica count, the seconds until the router listed
    them (`ready_s`), or the `error` the fleet refused it with."""
    def scale(at: float, replicas: int, _stopping: threading.Event) -> dict:
        asked = time.time()
        try:
            scaler.scale_to(replicas, say)
        except ScaleError as exc:
            say(f"warning: --scale-at {at:g}s={replicas}: {exc}")
            return {"ready_s": None, "error": str(exc)}
        return {"ready_s": round(time.time() - asked, 3), "error": None}

    return Schedule(plan, scale, run_dir, SCALING, lambda replicas: {"replicas": replicas})
