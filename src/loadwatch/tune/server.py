"""The server tune configures: the embedded engine, started with a configuration's flags and
environment, or a --target restarted into them by the user's --restart template."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadwatch.experiment.server import ServerError, restart
from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.routers import RouterError
from loadwatch.fleet.scale import ScaleError, Scaler
from loadwatch.loadrun.stack import running
from loadwatch.processes import log_tail
from loadwatch.stack.stack import Stack, scaler_of
from loadwatch.tune.config import Config

ARGS = "{vllm_args}"
# The embedded engine's KV cache size is loadwatch's own setting (engine/settings.py), passed on to
# vLLM as VLLM_CPU_KVCACHE_SPACE: the lever's variable reaches it through that setting.
ENGINE_SETTING = {"VLLM_CPU_KVCACHE_SPACE": "LOADWATCH_KV_CACHE_GIB"}


def restart_command(template: str, config: Config) -> str:
    return template.replace(ARGS, shlex.join(config.vllm_args))


@contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    names = {ENGINE_SETTING.get(name, name): value for name, value in env.items()}
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class Server:
    target: str | None
    restart: str | None
    ready_timeout: float
    starts: int = 0  # of the server, each costing a model load: what tune spends besides its load
    # Replicas behind a router: started here, each with the configuration's flags, or the user's own
    # behind `target` (its --restart restarts them all).
    fleet: FleetOptions | None = None
    replicas_at_start: int | None = None  # a fleet of the user's own with --scale: what its router listed first

    @contextmanager
    def serving(self, config: Config, folder: Path, say) -> Iterator[Stack]:
        """The stack up on the server in `config` for the body, then down. ComponentError or
        ServerError where it does not start: vLLM refused the configuration, or the restart failed."""
        folder.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with _environment(dict(config.env)):
            if self.target is not None:
                assert self.restart is not None
                with open(folder / "restart.log", "a") as log:
                    restart(restart_command(self.restart, config), self.target, self.ready_timeout, log)
            fleet = self.fleet
            settings = config.fleet_options()
            # A fleet of your own takes its replica count from --scale's command, once the stack is up.
            wanted = settings.pop("replicas", None) if self.target is not None else None
            if fleet is not None and settings:  # a fleet lever's: its router policy, an embedded fleet's replicas
                fleet = fleet.changed(settings)
            with running(folder, self.target, [] if self.target else list(config.vllm_args), say,
                         fleet=fleet) as stack:
                if stack.servers.scaling.command:  # a fleet of your own, scaled by --scale's command
                    self._scale(scaler_of(stack, say), wanted, say)
                yield stack

    def _scale(self, scaler: Scaler, wanted: str | None, say) -> None:
        """The configuration's replica count, or the one the fleet had when tune began."""
        try:
            if self.replicas_at_start is None:
                self.replicas_at_start = len(scaler.serving())
            count = int(wanted) if wanted else self.replicas_at_start
            if len(scaler.serving()) != count:
                scaler.scale_to(count, say)
        except (ScaleError, RouterError) as exc:
            raise ServerError(f"--scale: {exc}") from None


def why_refused(error: Exception, folder: Path) -> str:
    """vLLM's own words for a configuration that did not start: the last error line of what it (or
    the restart command) printed, else the whole message."""
    text = str(error)
    log = folder / "restart.log"
    if log.is_file():
        text += "\n" + log_tail(log)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["it did not start"])[-1]
