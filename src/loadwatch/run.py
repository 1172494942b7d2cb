"""`loadwatch run`: the stack up, a headless Locust run, its results and report, the stack down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from loadwatch.processes import log_tail, port_or_free
from loadwatch.prometheus import PrometheusAPI
from loadwatch.report.build import ReportError
from loadwatch.report.commands import annotate, write_report
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import Stack, down, up

INTERRUPTED = 130  # as a shell reports a command ended by Ctrl-C


@dataclass
class RunOptions:
    locustfile: Path
    target: str | None = None
    webhook_url: str | None = None
    users: int = 8
    spawn_rate: float = 8
    run_time: str = "30s"
    slo: list[str] = field(default_factory=list)
    metrics_port: int = 0
    out: Path = Path("runs")
    vllm_args: list[str] = field(default_factory=list)
    grafana_url: str | None = None
    locust_args: list[str] = field(default_factory=list)  # after `--`


def parse_duration(text: str) -> float:
    """Prometheus-style `5s`, `1m` as seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text)


def new_run_dir(out: Path) -> Path:
    return out / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def describe(stack: Stack, say) -> None:
    say(f"target (vLLM): {stack.target}")
    for component in stack.components:
        say(f"{component.name}: {component.url} (pid {component.pid}, log {component.log})")


def locust_command(options: RunOptions, stack: Stack, run_dir: Path) -> list[str]:
    """Locust's command line; its host goes in LOCUST_HOST (locust_environment), never in argv."""
    return [
        sys.executable, "-m", "locust", "-f", str(options.locustfile), "--headless",
        "-u", str(options.users), "-r", str(options.spawn_rate), "-t", options.run_time, "--stop-timeout", "60",
        "--metrics-port", str(stack.client_port), "--results-json", str(run_dir / "results.json"),
        "--csv", str(run_dir / "locust"), "--only-summary", "--engine-metrics", stack.engine_metrics,
        *[f"--slo={slo}" for slo in options.slo], *options.locust_args,
    ]


def locust_environment(options: RunOptions, stack: Stack) -> dict[str, str]:
    # The target as given: its credentials, if any, are for Locust (a Basic header), not for `ps`.
    return {**os.environ, "LOCUST_HOST": options.target or stack.target}


LOCUST_GRACE = 90.0  # seconds an interrupted Locust gets to let requests finish (60) and write its results


def _run_locust(command: list[str], env: dict[str, str], say) -> int:
    """Locust's exit code; on Ctrl-C or SIGTERM, 130 once Locust has written what it measured.

    Ctrl-C reaches Locust too (one process group) and it stops gracefully; a SIGTERM sent to
    loadwatch alone is passed on as SIGINT. A second interruption ends Locust at once.
    """
    locust = subprocess.Popen(command, env=env)
    try:
        return locust.wait()
    except KeyboardInterrupt:
        say("interrupted: letting Locust finish its requests and write the results (Ctrl-C again to cut it short)")
        try:
            if locust.poll() is None:
                locust.send_signal(signal.SIGINT)
            locust.wait(timeout=LOCUST_GRACE)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            locust.terminate()
            try:
                locust.wait(timeout=10)
            except subprocess.TimeoutExpired:
                locust.kill()
                locust.wait()
            say("Locust was stopped before it finished: its results may be missing")
        return INTERRUPTED


def headless_run(options: RunOptions, say) -> int:
    """The exit code is Locust's: 0, 1 for failures, 3 for a broken SLO; 130 when interrupted."""
    run_dir = new_run_dir(options.out)
    settings = StackSettings(webhook_url=options.webhook_url) if options.webhook_url else StackSettings()
    stack = up(settings, run_dir, options.target, options.vllm_args,
               client_port=port_or_free(options.metrics_port), say=say)
    describe(stack, say)
    code = INTERRUPTED
    try:
        say(f"load test: {options.users} users for {options.run_time} against {stack.target}")
        code = _run_locust(locust_command(options, stack, run_dir), locust_environment(options, stack), say)
        if code != INTERRUPTED:
            time.sleep(parse_duration(settings.scrape_interval))  # Prometheus' last look at the run
        _after_run(run_dir, stack.url("prometheus"), options.grafana_url, say)
    except KeyboardInterrupt:
        code = INTERRUPTED
        say("interrupted again: no report; stopping everything")
    finally:
        for component in stack.dead():
            say(f"error: {component.name} died during the run; end of {component.log}:\n"
                f"{log_tail(component.log)}")
        down(settings)
        say("stack stopped" + (" (embedded engine included)" if stack.engine_started else ""))
    if (run_dir / "results.json").exists():
        say(f"results: {run_dir}/results.json and results.txt; Prometheus data in {run_dir}/prometheus-data")
    return code


def _after_run(run_dir: Path, prometheus_url: str, grafana_url: str | None, say) -> None:
    """The report while the run's Prometheus is still up; problems are reported, the run's code stands."""
    results = run_dir / "results.json"
    if not results.exists():
        say("warning: the load test wrote no results: no report")
        return
    try:
        write_report(results, PrometheusAPI(prometheus_url), "30s", say)
    except (ReportError, OSError) as exc:
        say(f"warning: no report: {exc}")
    if grafana_url:
        annotate(results, grafana_url, None, say)
