"""The stack's lifecycle around a load run: up, described, and down again whatever happens, with
any part that died during the run named and the end of its log shown."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from loadwatch.defaults import LOOPBACK
from loadwatch.fleet.faults import killed_replicas
from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.servers import HERE
from loadwatch.loadrun.locust import LocustRun
from loadwatch.processes import log_tail
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import Stack, down, up


def new_run_dir(out: Path) -> Path:
    return out / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def describe(stack: Stack, say) -> None:
    servers = stack.servers
    say(f"target (vLLM): {servers.url}" + (f" ({servers.router.program})" if servers.router else ""))
    for name, url in servers.replicas.items() if servers.fleet else ():
        say(f"replica {name}: {url}")
    say(f"load generator metrics: http://{LOOPBACK}:{stack.client_port}/metrics")
    for component in stack.components:
        say(f"{component.name}: {component.url} (pid {component.pid}, log {component.log})")


@contextmanager
def running(run_dir: Path, target: str | None, vllm_args: list[str], say, settings: StackSettings | None = None,
            client_port: int | None = None, dev_endpoints: bool = False,
            fleet: FleetOptions | None = None) -> Iterator[Stack]:
    """The stack up for the body (the embedded engine unless `target`), then down. Starting raises
    ComponentError with the reason; nothing is left running either way. `client_port` as `up` takes it."""
    settings = settings or StackSettings()
    stack = up(settings, run_dir, target, vllm_args, client_port=client_port, say=say,
               dev_endpoints=dev_endpoints, fleet=fleet)
    describe(stack, say)
    try:
        yield stack
    finally:
        killed = killed_replicas(run_dir)  # --fault-at's: dead as asked
        for component in (c for c in stack.dead() if c.name not in killed):
            say(f"error: {component.name} died during the run; end of {component.log}:\n{log_tail(component.log)}")
        down(settings, run_dir)
        say("stack stopped" + (" (embedded engine included)" if stack.servers.owner == HERE else ""))


def on_stack(template: LocustRun, stack: Stack) -> LocustRun:
    """A Locust run as it runs on the stack: the client port and sidecar the stack gave it, and a
    fleet's replicas, so that each request's record names the one that served it."""
    return replace(template, metrics_port=stack.client_port, engine_metrics=stack.engine_metrics,
                   stack_options=stack.servers.locust_options())
