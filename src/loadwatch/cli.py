"""The `loadwatch` command: the embedded engine, and a whole headless run ending in a report."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from loadwatch.engine import process
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import SetupError, ensure_engine, ensure_model

REPO = Path(__file__).resolve().parents[2]


def say(message: str) -> None:
    print(f"loadwatch: {message}", flush=True)


def engine_command(args: argparse.Namespace) -> int:
    settings = EngineSettings()
    if args.action == "setup":
        ensure_engine(settings, say)
        ensure_model(settings, say)
        say(f"engine ready: {settings.venv}, model {settings.model_dir}")
    elif args.action == "start":
        ensure_engine(settings, say)
        info = process.start(settings, ensure_model(settings, say), args.port, args.passthrough, say=say)
        say(f"engine running: {info.url} (pid {info.pid}); stop it with `loadwatch engine stop`")
    elif args.action == "stop":
        info = process.stop(settings)
        say(f"engine stopped (pid {info.pid})" if info else "no engine was running")
    else:
        info = process.running(settings)
        if info is None:
            say("no engine running")
            return 1
        state = "healthy" if process.healthy(info.url) else "not answering /health"
        say(f"engine pid {info.pid} at {info.url}: {state}; log {info.log}")
    return 0


def exporter_command(args: argparse.Namespace) -> int:
    from loadwatch.exporter.serve import serve
    from loadwatch.exporter.settings import build_settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = build_settings(args.target, args.targets_file, port=args.port, host=args.host,
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


def run_command(args: argparse.Namespace) -> int:
    run_dir = Path(args.out) / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir.mkdir(parents=True, exist_ok=True)
    settings = EngineSettings()
    started_engine = False
    target = args.target
    try:
        if target is None:
            ensure_engine(settings, say)
            model_dir = ensure_model(settings, say)
            target = process.start(settings, model_dir, extra=args.vllm_args, say=say).url
            started_engine = True
        locust = [
            sys.executable, "-m", "locust", "-f", str(args.locustfile), "--headless", "-H", target,
            "-u", str(args.users), "-r", str(args.spawn_rate), "-t", args.run_time, "--stop-timeout", "60",
            "--metrics-port", str(args.metrics_port), "--results-json", str(run_dir / "results.json"),
            "--csv", str(run_dir / "locust"), "--only-summary",
            *[f"--slo={slo}" for slo in args.slo], *args.passthrough,
        ]
        say(f"load test: {args.users} users for {args.run_time} against {target}")
        code = subprocess.run(locust).returncode
    except KeyboardInterrupt:
        say("interrupted; what was measured is in " + str(run_dir))
        code = 130
    finally:
        if started_engine:
            process.stop(settings)
            say("embedded engine stopped")
    if (run_dir / "results.json").exists():
        say(f"report: {run_dir}/results.json and results.txt (Locust's CSVs beside them)")
    return code


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="loadwatch", description=__doc__,
        epilog="After `--`: flags for vllm serve (engine start) or for Locust (run).",
    )
    commands = top.add_subparsers(dest="command", required=True)

    engine = commands.add_parser("engine", help="the embedded vLLM on the CPU (tiny local model)")
    engine.add_argument("action", choices=["setup", "start", "stop", "status"])
    engine.add_argument("--port", type=int, default=None, help="default: a free port")
    engine.set_defaults(handler=engine_command)

    exporter = commands.add_parser("exporter", help="the engine sidecar: vLLM /metrics in a stable schema")
    exporter.add_argument("--target", action="append", default=[], metavar="NAME=URL",
                          help="a vLLM base URL (its /metrics is read), repeatable")
    exporter.add_argument("--targets-file", type=Path, help="YAML: targets: [{name: ..., url: ...}]")
    exporter.add_argument("--port", type=int, default=None, help="default 9647")
    exporter.add_argument("--host", default=None, help="default: all interfaces")
    exporter.add_argument("--interval", type=float, default=None, help="seconds between samples, default 1")
    exporter.add_argument("--window", type=float, default=None,
                          help="seconds behind the _max peaks and windowed ratios, default 15")
    exporter.add_argument("--timeout", type=float, default=None, help="per-sample timeout, default 2 s")
    exporter.set_defaults(handler=exporter_command)

    run = commands.add_parser("run", help="a headless load test ending in a summary and results JSON")
    run.add_argument("--target", help="base URL of an OpenAI-compatible server; default: the embedded engine")
    run.add_argument("--users", "-u", type=int, default=8)
    run.add_argument("--spawn-rate", "-r", type=float, default=8)
    run.add_argument("--run-time", "-t", default="30s")
    run.add_argument("--slo", action="append", default=[], help="as locust's --slo, repeatable")
    run.add_argument("--metrics-port", type=int, default=9646)
    run.add_argument("--locustfile", type=Path, default=REPO / "locustfiles" / "chat.py")
    run.add_argument("--out", default="runs", help="folder for the run directories")
    run.add_argument("--vllm-arg", dest="vllm_args", action="append", default=[],
                     help="extra flag for the embedded vllm serve, repeatable")
    run.set_defaults(handler=run_command)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Split by hand: argparse's REMAINDER would also swallow our own options after the action.
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser().parse_args(argv[:cut])
    args.passthrough = argv[cut + 1:]
    try:
        return args.handler(args)
    except (SetupError, process.EngineError) as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
