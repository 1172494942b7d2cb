"""A fleet on this machine: N embedded vLLM replicas, then the router in front of them.

Each replica is the embedded engine (its command and environment) under a name of its own, which it
also answers with (`--fingerprint-mode custom --fingerprint-value NAME`): that is how each request
is traced to the replica that served it, through any router. The replicas split the engine's cores
where there is one or more for each; on fewer cores they share them, and the docs say what such a
fleet can show (docs/guides/fleet.md).
"""

from __future__ import annotations

from collections.abc import Callable

from loadwatch import processes
from loadwatch.defaults import LOOPBACK, Part
from loadwatch.engine import process as engine
from loadwatch.engine.adapters import with_adapters
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_engine, ensure_model, ensure_package
from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.servers import HERE, FrontRouter, Resizing, Servers

START_TIMEOUT = 600.0  # replicas load side by side on the same cores: slower than one engine alone
# launch(name, command, url, env, cpus) -> the spawned server, recorded by the stack before it is awaited
Launch = Callable[[str, list[str], str, dict[str, str] | None, set[int] | None], processes.Spawned]


def core_sets(cores: list[int], replicas: int) -> list[list[int]]:
    """Each replica's cores: an even split where every replica gets one at least; else all of them
    shared (a replica bound alone to a core another one spins on would only wait)."""
    if len(cores) < replicas:
        return [cores] * replicas
    size = len(cores) // replicas
    return [cores[i * size:(i + 1) * size] for i in range(replicas)]


def start_fleet(options: FleetOptions, vllm_args: list[str], ports: dict[str, int], launch: Launch, say,
                dev_endpoints: bool = False) -> Servers:
    """The replicas, awaited, then the router, awaited. ComponentError (with the end of its log) when
    one does not start; RouterError for a policy or flag the router refuses, before anything starts."""
    settings = EngineSettings()
    program = options.program
    policy = options.router_policy or program.default_policy
    ensure_engine(settings, say)
    ensure_package(settings, program.requirement, say)
    program.check_policy(settings.python, policy, options.router_arg)
    model = ensure_model(settings, say)
    vllm_args = with_adapters(settings, model, vllm_args, say)  # each replica serves the local adapters too
    names = options.names()
    env = engine.environment(settings, dev_endpoints)
    cores = core_sets(engine.engine_cpus(settings), len(names))
    say(f"Starting {len(names)} vLLM replicas ({', '.join(names)}) behind {program.name} ({policy})")
    started = []
    for name, own in zip(names, cores, strict=True):
        part, port = Part.replica(name), ports[Part.replica(name)]
        url = f"http://{LOOPBACK}:{port}"
        flags = [*vllm_args, *options.flags_of(name), "--fingerprint-mode", "custom", "--fingerprint-value", name]
        started.append(launch(part, engine.command(settings, model, port, flags), url,
                              {**env, "VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, own))}, set(own)))
    for spawned in started:
        processes.await_ready(spawned, "/health", START_TIMEOUT,
                              on_wait=lambda waited: say(f"  still waiting for the replicas to load ({waited:.0f} s)…"))
    replicas = {name: spawned.component.url for name, spawned in zip(names, started, strict=True)}
    url = f"http://{LOOPBACK}:{ports[Part.ROUTER]}"
    metrics = f"http://{LOOPBACK}:{ports[Part.ROUTER_METRICS]}"
    routed = launch(Part.ROUTER, program.command(settings.python, ports[Part.ROUTER], ports[Part.ROUTER_METRICS],
                                           list(replicas.values()), policy, options.router_arg), url, None, None)
    processes.await_ready(routed, program.health_path, 120.0)
    say(f"{program.name} ready on {url}, in front of " + ", ".join(f"{n} {u}" for n, u in replicas.items()))
    return Servers(owner=HERE, url=url, replicas=replicas, router=FrontRouter(program=program.name, metrics=metrics,
                   policy=policy), scaling=Resizing.of(options))
