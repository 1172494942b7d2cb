"""`loadwatch up` / `down`: engine (unless a target is given), sidecar, Prometheus, Alertmanager.

Each stack is its run folder's: its state there (stack.json), its own ports, its own processes.
Stacks side by side on one load host are the rule (two people, two servers, two folders), with one
exception: a second embedded engine is refused, since two would share this machine's cores and each
would measure the other. A home folder lists the running stacks (`stacks/`), so that `down` stops
the one named, or the only one, and never another folder's.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from loadwatch import processes
from loadwatch.credentials import split_credentials
from loadwatch.defaults import LOOPBACK, PORTS, Part
from loadwatch.engine import process as engine
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_engine, ensure_model
from loadwatch.fleet.embedded import start_fleet
from loadwatch.fleet.naming import answered_name
from loadwatch.fleet.options import FleetOptions, replica_name
from loadwatch.fleet.routers import RouterError, RouterProgram
from loadwatch.fleet.scale import Scaler
from loadwatch.fleet.servers import HERE, USER, FrontRouter, Resizing, Servers
from loadwatch.interrupts import held
from loadwatch.processes import Component, ComponentError, PortTaken, port_or_free
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.settings import ReplicaNames
from loadwatch.stack.config import render_alertmanager, render_prometheus
from loadwatch.stack.readback import EXEMPLARS
from loadwatch.stack.settings import StackSettings


class StackError(ComponentError):
    """The stack cannot start or run; the message says which part and why."""


class WhichStack(StackError):
    """`down` without a folder while several stacks run: the user must name one."""


STATE = "stack.json"  # in the run folder
BEFORE_SERVERS = ("target", "engine_started", "own_engine", "fleet")  # an older stack.json's, now its servers

# What a user does about a server's port taken by another process while the stack started.
TAKEN_PORT_REMEDY = ("start the stack again, which chooses a port that is free then "
                     "(LOADWATCH_STACK_FREE_PORTS=true: every server on a free port, for stacks side by side)")

DEFAULT_PORTS = {Part.EXPORTER: PORTS["sidecar"], Part.PROMETHEUS: PORTS["prometheus"],
                 Part.ALERTMANAGER: PORTS["alertmanager"], Part.ALERT_LOG: PORTS["alert_log"]}


@dataclass
class Stack:
    """What `loadwatch up` started, saved in the state file as each part starts: `down`, or an
    interrupted `up`, finds every PID there."""

    run_dir: str
    client_port: int
    servers: Servers  # the servers under test: the embedded engine or fleet, or the user's
    components: list[Component] = field(default_factory=list)
    owner: int = field(default_factory=os.getpid)  # the loadwatch process that started it
    # Every port it claimed, its client's included, saved before any of them is bound: a stack that
    # starts meanwhile avoids them (a free port is free only until its server binds it).
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def state_file(self) -> Path:
        return Path(self.run_dir) / STATE

    def live(self) -> bool:
        """Starting (its owner still at work) or running (a part alive)."""
        return processes.alive(self.owner) or any(c.alive() for c in self.components)

    def url(self, name: str) -> str:
        return next(c.url for c in self.components if c.name == name)

    @property
    def engine_metrics(self) -> str:
        """The sidecar's /metrics: what a Locust master's web UI charts the engine from."""
        return self.url(Part.EXPORTER) + "/metrics"

    def dead(self) -> list[Component]:
        return [c for c in self.components if not c.alive()]

    def save(self, path: Path) -> None:
        processes.write_state(path, {**asdict(self), "servers": self.servers.model_dump(mode="json")})

    @classmethod
    def load(cls, path: Path) -> Stack | None:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        data["components"] = [Component(**c) for c in data["components"]]
        # A state file of before Servers keeps its fields side by side: its validator reads them.
        data["servers"] = Servers.model_validate(
            data["servers"] if "servers" in data else {key: data.pop(key, None) for key in BEFORE_SERVERS})
        return cls(**data)


@contextmanager
def _claiming(settings: StackSettings) -> Iterator[None]:
    """One stack at a time chooses its ports and saves them: two `up`s begun together would otherwise
    both find the same port free."""
    settings.stacks_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.stacks_dir / ".ports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _claimed(settings: StackSettings, but: Path | None = None) -> set[int]:
    """The ports the running stacks of this home hold (all but the stack of `but`)."""
    own = but.resolve() if but is not None else None
    return {port for other in running_stacks(settings) if own is None or Path(other.run_dir).resolve() != own
            for port in (*other.ports.values(), other.client_port)}


def _choose_ports(settings: StackSettings, client_port: int | None, fleet: FleetOptions | None) -> dict[str, int]:
    """Each server's default port (the client's too, unless the user named one) where it is free and
    no other stack of this home has claimed it; else a free one. An embedded fleet's replicas and
    router take free ones, as the embedded engine does."""
    claimed = _claimed(settings)
    ports: dict[str, int] = {}
    embedded = fleet.parts() if fleet is not None else []
    wanted = {Part.CLIENT: PORTS["client_metrics"], **DEFAULT_PORTS, **dict.fromkeys(embedded, 0)}
    for name, port in wanted.items():
        if name == Part.CLIENT and client_port is not None:
            ports[name] = client_port or port_or_free(0, claimed)  # named by the user: as named
        else:
            ports[name] = port_or_free(0 if settings.free_ports else port, claimed)
        claimed.add(ports[name])
    return ports


def _choose_again(stack: Stack, settings: StackSettings) -> None:
    """The sidecar's, Prometheus', Alertmanager's and the alert log's ports, chosen before the servers
    under test started (minutes, for vLLM), chosen again where some process has bound one since (another
    home's stack, whose claims this home does not see): a free port is free only until it is bound. The
    moment left, between this and each server's bind, is what their readiness check (PortTaken) covers."""
    with _claiming(settings):
        claimed = _claimed(settings, but=Path(stack.run_dir)) | set(stack.ports.values())
        for name, default in DEFAULT_PORTS.items():
            if port_or_free(stack.ports[name]) != stack.ports[name]:  # bound by some process now
                stack.ports[name] = port_or_free(0 if settings.free_ports else default, claimed)
                claimed.add(stack.ports[name])
        stack.save(stack.state_file)


def _start_all(stack: Stack, settings: StackSettings, run_dir: Path) -> None:
    _choose_again(stack, settings)
    ports = stack.ports
    urls = {name: f"http://{LOOPBACK}:{port}" for name, port in ports.items()}

    spawned: list[tuple[processes.Spawned, str]] = []

    def launch(name: str, command: list[str], ready_path: str) -> None:
        spawned.append((_launch(stack, run_dir, name, command, urls[name]), ready_path))

    # All four at once, then awaited: none needs another to be up to start, and one after the other
    # they took twice as long (each Python one a second or two of imports).
    launch(Part.EXPORTER, _exporter_command(stack, settings), "/metrics")
    if not settings.webhook_url:  # alerts go to a log of the run, not nowhere
        launch(Part.ALERT_LOG, [sys.executable, "-m", "loadwatch.cli", "alert-log", "--host", LOOPBACK,
                                "--port", str(ports[Part.ALERT_LOG])], "/-/ready")
    am_config = render_alertmanager(settings, run_dir / "alertmanager",
                                    settings.webhook_url or f"{urls[Part.ALERT_LOG]}/alerts")
    prom_config = _prometheus_config(stack, settings, run_dir)
    launch(
        Part.ALERTMANAGER,
        [settings.alertmanager_bin, f"--config.file={am_config}", f"--storage.path={run_dir / 'alertmanager-data'}",
         f"--web.listen-address={LOOPBACK}:{ports[Part.ALERTMANAGER]}", "--cluster.listen-address="],
        "/-/ready")
    launch(
        Part.PROMETHEUS,
        [settings.prometheus_bin, f"--config.file={prom_config}", f"--storage.tsdb.path={run_dir / 'prometheus-data'}",
         f"--web.listen-address={LOOPBACK}:{ports[Part.PROMETHEUS]}", EXEMPLARS],
        "/-/ready")
    for started, ready_path in spawned:
        try:
            processes.await_ready(started, ready_path, settings.start_timeout)
        except PortTaken as exc:
            raise StackError(exc.saying(TAKEN_PORT_REMEDY)) from None
        except ComponentError as exc:
            raise StackError(str(exc)) from None
    _wait_for_first_scrape(urls[Part.PROMETHEUS], settings.start_timeout)


def _exporter_command(stack: Stack, settings: StackSettings) -> list[str]:
    """The sidecar's command line: every replica a target, and a fleet's router."""
    return [sys.executable, "-m", "loadwatch.cli", "exporter", *stack.servers.exporter_options(),
            "--host", LOOPBACK, "--port", str(stack.ports[Part.EXPORTER]),
            "--interval", str(settings.exporter_interval), "--window", str(settings.exporter_window),
            "--timeout", str(settings.exporter_timeout)]


def _prometheus_config(stack: Stack, settings: StackSettings, run_dir: Path) -> Path:
    """The run's Prometheus config: every replica scraped directly too."""
    return render_prometheus(
        settings, run_dir / "prometheus", client=f"{LOOPBACK}:{stack.client_port}",
        exporter=f"{LOOPBACK}:{stack.ports[Part.EXPORTER]}",
        vllm=[urlsplit(url).netloc for url in stack.servers.replicas.values()],
        alertmanager=f"{LOOPBACK}:{stack.ports[Part.ALERTMANAGER]}")


def _launch(stack: Stack, run_dir: Path, name: str, command: list[str], url: str, env: dict[str, str] | None = None,
            cpus: set[int] | None = None) -> processes.Spawned:
    """A server of the stack started and recorded in its state before anything waits for it."""
    with held():  # an interrupt waits until the stack has it to stop
        try:
            started = processes.spawn(name, command, url, run_dir / "logs" / f"{name}.log", env, cpus)
        except ComponentError as exc:
            raise StackError(str(exc)) from None
        stack.components.append(started.component)
        stack.save(stack.state_file)
    return started


def _users_fleet(target: str, options: FleetOptions) -> Servers:
    """The user's own fleet behind `target`: the replicas named, or those its router lists; each must
    answer, or the run would measure a fleet it cannot see."""
    if options.replica and not options.patterns:
        replicas = {name: url for name, _, url in (item.partition("=") for item in options.replica)}
    else:
        replicas = _listed(target, options.program, options.patterns)
    _answering(replicas)
    return Servers(owner=USER, url=target, replicas=replicas,
                   router=FrontRouter(program=options.program.name, metrics=options.router_metrics),
                   scaling=Resizing.of(options))


def _listed(target: str, program: RouterProgram, patterns: Sequence[str],
            known: dict[str, str] | None = None) -> dict[str, str]:
    """The replicas the router lists now: each named by the name it answers with where --replica gives
    patterns (a pod keeps its name while others come and go), else a, b, ... in the router's order, a
    replica `known` already keeping its name and a new one taking one no replica had."""
    listed = program.workers(target)
    if not listed:
        raise RouterError(f"the router at {target} lists no replica")
    if not patterns:
        by_url = {url: name for name, url in (known or {}).items()}
        free = (replica_name(i) for i in range(len(listed) + len(by_url)) if replica_name(i) not in by_url.values())
        return {by_url.get(url) or next(free): url for url in listed}
    names = ReplicaNames(frozenset(), tuple(patterns))
    replicas = {}
    for url in listed:
        name = answered_name(url)
        if not names.name(name):
            raise RouterError(f"the replica at {url} answers as {name!r}, which --replica "
                              f"{' '.join(patterns)} does not name")
        replicas[name] = url
    return replicas


def _answering(replicas: dict[str, str]) -> None:
    for name, url in replicas.items():
        if not processes.answers(url.rstrip("/") + "/metrics"):
            raise RouterError(f"replica {name} at {url} does not answer {url.rstrip('/')}/metrics: check its URL "
                              "(as this machine reaches it, not as the router does)")


def relist(stack: Stack, say) -> None:
    """After a fleet of the user's own was scaled: the replicas its router lists now, read by the sidecar
    and Prometheus (a pod scaled in and out again has a new address; one scaled away is not read, so
    it is not taken for lost). The next load waits for Prometheus' first scrape of the restarted
    sidecar: without it a search that scaled 2 -> 1 -> 2 replicas began a level with its engine series
    missing, and on a busy machine found no autoscaling signal at the knee. Replicas named with
    --replica NAME=URL stay as named. RouterError where they cannot be read."""
    servers = stack.servers
    if not servers.fleet or servers.scaling.named:
        return
    replicas = _listed(servers.url, servers.program, servers.scaling.patterns, servers.replicas)
    if replicas == servers.replicas:
        return
    _answering(replicas)
    servers.replicas = replicas
    settings = StackSettings()  # the sidecar's and Prometheus' own settings, as the stack started them
    run_dir = Path(stack.run_dir)
    exporter = next(c for c in stack.components if c.name == Part.EXPORTER)
    processes.stop_group(exporter.pid, 20.0)
    stack.components.remove(exporter)
    restarted = time.time()
    try:
        started = _launch(stack, run_dir, Part.EXPORTER, _exporter_command(stack, settings), exporter.url)
        _prometheus_config(stack, settings, run_dir)
        # Prometheus reloads its config
        os.kill(next(c.pid for c in stack.components if c.name == Part.PROMETHEUS), signal.SIGHUP)
        processes.await_ready(started, "/metrics", settings.start_timeout)
        _wait_for_first_scrape(stack.url(Part.PROMETHEUS), settings.start_timeout, after=restarted)
    except PortTaken as exc:  # its old port, bound by another process while it restarted
        raise RouterError("the sidecar could not read the replicas listed now: "
                          + exc.saying(TAKEN_PORT_REMEDY)) from None
    except ComponentError as exc:
        raise RouterError(f"the sidecar could not read the replicas listed now: {exc}") from None
    stack.save(stack.state_file)
    say(f"fleet: reading the replicas the router lists now: {', '.join(sorted(replicas))}")


def scaler_of(stack: Stack, say) -> Scaler:
    """The scaler of the stack's fleet, as the fleet options it was started with asked (kept in its
    servers' scaling); a fleet of the user's own is read anew after each change."""
    assert stack.servers.fleet
    scaler = Scaler.of(stack.servers, Path(stack.run_dir))
    if not scaler.embedded:
        scaler.relisted = lambda: relist(stack, say)
    return scaler


def _wait_for_first_scrape(url: str, timeout: float, after: float = 0.0) -> None:
    """Ready is not scraping: Prometheus starts its scrape loops a few seconds later, and a load test
    begun before then would have its first seconds missing from every graph and report. `after`: a
    scrape of the sidecar later than this (epoch seconds), as after a restart."""
    api = PrometheusAPI(url, timeout=5)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if api.query(f'timestamp(up{{job="loadwatch-engine"}} == 1) > {after:.3f}', time.time()):
                return
            problem = "had not scraped the sidecar"
        except PrometheusError as exc:
            problem = f"did not answer ({exc})"
        if time.monotonic() > deadline:
            raise StackError(f"Prometheus at {url} {problem} after {timeout:.0f} s")
        time.sleep(0.5)


def _entry(settings: StackSettings, run_dir: Path | str) -> Path:
    """The home's note that a stack of this run folder runs."""
    return settings.stacks_dir / (hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:16] + ".json")


def running_stacks(settings: StackSettings) -> list[Stack]:
    """The stacks of this home that are starting or running, oldest first, each with its run
    folder's absolute path; the notes of the others are removed."""
    stacks = []
    for note in sorted(settings.stacks_dir.glob("*.json"), key=lambda p: p.stat().st_mtime):
        try:
            run_dir = json.loads(note.read_text())["run_dir"]
            stack = Stack.load(Path(run_dir) / STATE)
        except (OSError, ValueError, KeyError, TypeError):
            stack = None
        if stack is not None and stack.live():
            stack.run_dir = run_dir
            stacks.append(stack)
        else:
            note.unlink(missing_ok=True)
    return stacks


def up(settings: StackSettings, run_dir: Path, target: str | None = None, vllm_args: list[str] | None = None,
       client_port: int | None = None, say=print, dev_endpoints: bool = False,
       fleet: FleetOptions | None = None) -> Stack:
    """`client_port`: the load generator's metrics port as the user named it (0: any free one); None:
    its default unless taken or claimed by another stack. `fleet`: replicas behind a router, started
    here (`fleet.replicas`, without a target) or the user's own behind `target`."""
    fleet = fleet if fleet is not None and fleet.wanted else None
    with _claiming(settings):
        engines = [s for s in running_stacks(settings) if s.servers.owner == HERE]
        if target is None and engines:
            raise StackError(f"the stack of {engines[0].run_dir} already runs the embedded engine, and two would "
                             "share this machine's cores, each measuring the other: give --target, or stop it with "
                             f"`loadwatch down {engines[0].run_dir}`")
        run_dir.mkdir(parents=True, exist_ok=True)
        ports = _choose_ports(settings, client_port, fleet)
        # Without credentials: vLLM's /metrics needs none, and stack.json, logs and configs keep none.
        servers = Servers(owner=HERE) if target is None else Servers.engine(split_credentials(target)[0], USER)
        stack = Stack(str(run_dir), ports[Part.CLIENT], servers, ports=ports)
        stack.save(stack.state_file)
        processes.write_state(_entry(settings, run_dir), {"run_dir": str(run_dir.resolve())})
    engine_settings = EngineSettings()
    try:
        if fleet is not None and target is None:
            try:
                stack.servers = start_fleet(
                    fleet, vllm_args or [], ports, say=say, dev_endpoints=dev_endpoints,
                    launch=lambda name, command, url, env, cpus: _launch(stack, run_dir, name, command, url, env,
                                                                         cpus))
            # A replica's or the router's port (the router's chosen before the replicas loaded), taken by
            # another process: the stack's failure, not the configuration's (tune starts it again).
            except PortTaken as exc:
                raise StackError(exc.saying(TAKEN_PORT_REMEDY)) from None
        elif fleet is not None:
            stack.servers = _users_fleet(stack.servers.url, fleet)
        elif target is None:
            ensure_engine(engine_settings, say)
            stack.servers.home_engine = True
            stack.save(stack.state_file)
            url = engine.start(engine_settings, ensure_model(engine_settings, say), extra=vllm_args, say=say,
                               dev_endpoints=dev_endpoints).url
            stack.servers = Servers.engine(url, HERE, home_engine=True)
        stack.servers.request_url = target if target is not None else stack.servers.url
        stack.save(stack.state_file)
        _start_all(stack, settings, run_dir)
    except BaseException:
        _stop(stack, engine_settings)
        _forget(settings, run_dir)
        raise
    stack.save(stack.state_file)
    return stack


def _stop(stack: Stack, engine_settings: EngineSettings) -> None:
    for component in reversed(stack.components):
        processes.stop_group(component.pid, 20.0)
    # Only an engine of its own: a fleet's stack that failed or went down had stopped another stack's
    # (a CI run: a fleet refused for its policy stopped the engine another run was loading).
    if stack.servers.home_engine:
        engine.stop(engine_settings)


def _forget(settings: StackSettings, run_dir: Path) -> None:
    """A stopped stack leaves no state: its PIDs may be another process's tomorrow."""
    (run_dir / STATE).unlink(missing_ok=True)
    _entry(settings, run_dir).unlink(missing_ok=True)


def down(settings: StackSettings, run_dir: Path | None = None) -> Stack | None:
    """Stop the stack of `run_dir`, or the only one running; None when there is none to stop.
    WhichStack when several run and none is named."""
    if run_dir is None:
        stacks = running_stacks(settings)
        if len(stacks) > 1:
            raise WhichStack("several stacks run; name the one to stop:\n" + "\n".join(
                f"  loadwatch down {s.run_dir}" for s in stacks))
        if not stacks:
            return None
        run_dir = Path(stacks[0].run_dir)
    stack = Stack.load(run_dir / STATE)
    if stack is None:
        return None
    stack.run_dir = str(run_dir)  # as this command reaches it
    _stop(stack, EngineSettings())
    _forget(settings, run_dir)
    return stack
