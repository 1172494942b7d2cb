"""`loadwatch run`: the stack up, a headless Locust run, its results and report, the stack down."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from loadwatch.defaults import Part
from loadwatch.durations import parse_duration
from loadwatch.fleet.faults import Injector, cap_of, fault_schedule
from loadwatch.fleet.options import ServerOptions
from loadwatch.fleet.scale import scale_schedule
from loadwatch.fleet.schedule import Schedule
from loadwatch.loadrun.locust import INTERRUPTED, Load, LocustRun
from loadwatch.loadrun.stack import new_run_dir, running
from loadwatch.metrics.slo import SLO
from loadwatch.prometheus import PrometheusAPI
from loadwatch.report.build import ReportError
from loadwatch.report.commands import annotate, history_add, write_report
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import Stack, scaler_of

STOP_TIMEOUT = 60.0  # seconds an interrupted run's requests get to finish


@dataclass
class RunOptions:
    locustfile: Path
    target: str | None = None
    webhook_url: str | None = None
    users: int = 8
    spawn_rate: float = 8
    run_time: str = "30s"
    slo: list[SLO] = field(default_factory=list)
    metrics_port: int | None = None  # None: its default, unless another stack holds it
    out: Path = Path("runs")
    vllm_args: list[str] = field(default_factory=list)
    grafana_url: str | None = None
    locust_args: list[str] = field(default_factory=list)  # after `--`
    fleet: ServerOptions | None = None  # with run's --scale-at plan and --fault-at faults
    history: Path | None = None  # the history the run is added to once written
    label: str | None = None  # its name there (a commit, a release)


def headless_run(options: RunOptions, say) -> int:
    """The exit code is Locust's: 0, 1 for failures, 3 for a broken SLO; 130 when interrupted."""
    run_dir = new_run_dir(options.out)
    settings = StackSettings(webhook_url=options.webhook_url) if options.webhook_url else StackSettings()
    with running(run_dir, options.target, options.vllm_args, say, settings, options.metrics_port,
                 fleet=options.fleet) as stack:
        locust = LocustRun(
            options.locustfile, run_dir / "results.json", stack.client_port,
            Load(users=options.users, spawn_rate=options.spawn_rate, duration=parse_duration(options.run_time)),
            slo=options.slo, engine_metrics=stack.engine_metrics, csv_prefix=run_dir / "locust",
            stop_timeout=STOP_TIMEOUT, options=[*options.locust_args, *stack.servers.locust_options()])
        schedules = _schedules(options, stack, run_dir, say)
        try:
            say(f"load test: {options.users} users for {options.run_time} against {stack.servers.url}")
            for schedule in schedules:
                schedule.begin()
            try:
                code = locust.run(stack.servers.request_url, say=say).code
            finally:
                for schedule in schedules:
                    schedule.end()
            if code != INTERRUPTED:
                time.sleep(parse_duration(settings.scrape_interval))  # Prometheus' last look at the run
            _after_run(run_dir, stack.url(Part.PROMETHEUS), options.grafana_url, say)
        except KeyboardInterrupt:
            code = INTERRUPTED
            say("interrupted again: no report; stopping everything")
    if (run_dir / "results.json").exists():
        say(f"results: {run_dir}/results.json and results.txt; Prometheus data in {run_dir}/prometheus-data")
        if options.history is not None and code != INTERRUPTED and history_add(options.history, run_dir,
                                                                                options.label, say) != 0:
            code = code or 1  # the run stands; its place in the history is missing
    return code


def _schedules(options: RunOptions, stack: Stack, run_dir: Path, say) -> list[Schedule]:
    """The changes timed into the load: --scale-at's and --fault-at's (a fault needs the embedded
    fleet's processes, which ServerOptions has checked that the run starts)."""
    fleet, servers = options.fleet, stack.servers
    if fleet is None or not servers.fleet:
        return []
    schedules: list[Schedule] = []
    if fleet.plan:
        schedules.append(scale_schedule(scaler_of(stack, say), fleet.plan, run_dir, say))
    if fleet.faults:
        pids = {name: next(c.pid for c in stack.components if c.name == Part.replica(name))
                for name in servers.replicas}
        caps = {name: cap_of(fleet, options.vllm_args, name) for name in servers.replicas}
        schedules.append(fault_schedule(fleet.faults, Injector(pids, servers.replicas, caps, say), run_dir))
    return schedules


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
