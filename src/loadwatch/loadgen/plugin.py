"""Locust event listeners: options, per-process recording, worker deltas, the end-of-run verdict."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

import gevent
from gevent.lock import Semaphore
from gevent.pywsgi import WSGIServer
from locust import events
from locust.runners import MasterRunner, WorkerRunner
from prometheus_client import make_wsgi_app
from pydantic import ValidationError

from loadwatch.client.stream import Streamer
from loadwatch.loadgen import webui
from loadwatch.loadgen.exposition import client_registry
from loadwatch.loadgen.options import add_options
from loadwatch.loadgen.quota import (
    ASK,
    FINAL,
    FLUSH,
    GRANT,
    Quota,
    Tickets,
    WorkerTickets,
)
from loadwatch.loadgen.recorder import REPORT_KEY, Recorder
from loadwatch.loadgen.schedule import Stage, level_now, plan_run
from loadwatch.loadgen.shape import LOAD_START, OptionShape, run_users
from loadwatch.loadgen.state import RunState
from loadwatch.metrics.summary import format_block, summarize
from loadwatch.settings import LoadSettings
from loadwatch.workloads.datasets import Workload, build, validate
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.tokens import tokenizer_for

log = logging.getLogger(__name__)
SLO_EXIT_CODE = 3
TOKENIZED = ("sharegpt", "random", "prefix-repetition")
TICKET_BATCH = 4  # tickets a worker asks for at a time: few messages, little held back at the end


@dataclass
class Process:
    """loadwatch's part of one Locust process, kept on `environment.loadwatch`."""

    settings: LoadSettings
    recorder: Recorder
    state: RunState | None = None  # on the master or a local runner only
    summary: str = ""
    workload: Workload | None = None  # built on first use, from this run's settings
    quota: Quota | None = None  # what the users of this process may still send
    tickets: Tickets | WorkerTickets | None = None  # the pool (master, local) or a worker's supply
    user_numbers: Iterator[int] = field(default_factory=count)  # for the users' arrival seeds
    # A worker's copies of what the master's RunState holds: the open loop's schedule, and when it started.
    schedule: list[Stage] = field(default_factory=list)
    load_start: float | None = None
    _building: Semaphore = field(default_factory=Semaphore)

    def request_rate(self) -> float | None:
        """The open loop's rate now: --request-rate, or the load shape's level at this moment."""
        if self.state is not None:
            schedule, start = self.state.schedule, self.state.load_started()
        else:
            schedule, start = self.schedule, self.load_start
        return level_now(schedule, start, time.time()) if schedule else self.settings.request_rate

    def dataset_workload(self, streamer: Streamer, model: str | None) -> Workload:
        """The --dataset of this run, built once per process by the first user that asks."""
        with self._building:
            if self.workload is None:
                tokenizer = tokenizer_for(streamer, model) if self.settings.dataset in TOKENIZED else None
                self.workload = build(self.settings, tokenizer)
            return self.workload


events.init_command_line_parser.add_listener(add_options)
# Locust fires reset_stats and quit without the environment: reach it from here.
_processes: list[Process] = []


def _scenarios(environment) -> list[str]:
    return sorted({getattr(cls, "scenario", cls.__name__) for cls in environment.user_classes}) or ["chat"]


def _serve_metrics(environment, state: RunState, port: int) -> None:
    registry = client_registry(state, lambda: environment.runner.user_count if environment.runner else 0)
    if environment.web_ui:
        webui.install(environment, state, registry)
    if port == 0:
        return
    host = environment.parsed_options.web_host if environment.parsed_options else ""
    server = WSGIServer((host or "", port), make_wsgi_app(registry), log=None)
    try:
        server.start()
    except OSError as exc:
        sys.exit(f"loadwatch: cannot serve metrics on port {port}: {exc.strerror}; "
                 "choose another with --metrics-port (0 turns it off)")
    log.info("Client metrics at http://%s:%d/metrics", host or "0.0.0.0", port)


def _settings(options) -> LoadSettings:
    """Validated settings with a readable dataset, or ValueError naming what is wrong."""
    try:
        settings = LoadSettings.from_options(options)
    except ValidationError as exc:
        problems = "; ".join(f"--{str(e['loc'][0]).replace('_', '-')}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"loadwatch: invalid options: {problems}") from None
    try:
        validate(settings)
    except DatasetError as exc:
        raise ValueError(f"loadwatch: {exc}") from None
    try:
        plan_run(settings, run_users(options))
    except ValueError as exc:
        raise ValueError(f"loadwatch: {exc}") from None
    return settings


def _refresh_settings(environment) -> None:
    """The web UI (and a master, for its workers) may have changed options since init."""
    process: Process = environment.loadwatch
    try:
        process.settings = _settings(environment.parsed_options)
    except ValueError as exc:
        log.error("%s; this run keeps the previous options", exc)


@events.init.add_listener
def on_init(environment, **_kwargs) -> None:
    try:
        settings = _settings(environment.parsed_options)
    except ValueError as exc:
        sys.exit(str(exc))
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        process = Process(settings, Recorder())
        events.report_to_master.add_listener(
            lambda data, **_kw: data.__setitem__(REPORT_KEY, process.recorder.report())
        )
        process.tickets = WorkerTickets(runner, TICKET_BATCH)
        runner.register_message(FLUSH, lambda **_kw: _send_final_report(environment), concurrent=True)
        runner.register_message(LOAD_START, lambda msg, **_kw: setattr(process, "load_start", msg.data["at"]))
    else:
        state = RunState(_scenarios(environment), environment.host or "")
        process = Process(settings, state.recorder, state)
        if isinstance(runner, MasterRunner):
            events.worker_report.add_listener(state.on_worker_report)
            events.worker_report.add_listener(lambda **_kw: _stop_when_done(environment))
            runner.register_message(ASK, lambda msg, **_kw: runner.send_message(
                GRANT, {"kinds": process.tickets.take(msg.data["n"]) if process.tickets else []}, msg.node_id))
            runner.register_message(FINAL, lambda msg, **_kw: state.on_final_report(msg.node_id, msg.data))
        _serve_metrics(environment, state, settings.metrics_port)
    environment.loadwatch = process
    _processes.append(process)
    if settings.shape and not isinstance(runner, WorkerRunner):
        environment.shape_class = OptionShape(environment, lambda: _refresh_settings(environment))
        environment.shape_class.runner = runner
    events.request.add_listener(process.recorder.on_request)
    if not isinstance(runner, (WorkerRunner, MasterRunner)):
        events.request.add_listener(lambda **_kw: _stop_when_done(environment))


def _send_final_report(environment) -> None:
    """Worker: start nothing new, let what is in flight finish, then report it all to the master."""
    process: Process = environment.loadwatch
    if process.quota is not None:
        process.quota.closed = True
    deadline = time.monotonic() + (environment.stop_timeout or 0)
    while sum(process.recorder.in_flight.values()) > 0 and time.monotonic() < deadline:
        gevent.sleep(0.05)
    environment.runner.send_message(FINAL, process.recorder.report())


@events.test_stopping.add_listener
def on_test_stopping(environment, **_kwargs) -> None:
    """Master: collect every worker's last requests before Locust's stop or quit goes out.

    On quit, Locust's master waits only half a second for the workers' last stats, while a worker
    first lets its in-flight requests finish (--stop-timeout): those requests would be lost.
    """
    runner = environment.runner
    if not isinstance(runner, MasterRunner):
        return
    state = environment.loadwatch.state
    # A worker marked missing is often only late with its heartbeats (a busy CPU): it still runs
    # users and answers, so its last requests are awaited as well.
    workers = {c.id for c in runner.clients.all}
    if workers:
        state.expect_final_reports(workers)
        runner.send_message(FLUSH, {})
        if not state.finals_done.wait(timeout=(environment.stop_timeout or 0) + 10):
            log.warning("No last report from worker(s) %s: their requests since their previous report "
                        "are not counted", ", ".join(sorted(state.finals_pending)))


def _stop_when_done(environment) -> None:
    """End the run once --num-requests measured requests have finished, everywhere."""
    process: Process = environment.loadwatch
    wanted = process.settings.num_requests
    if wanted and process.state.phase == "running" and process.recorder.finished >= wanted:
        process.state.phase = "stopping"
        # Not from inside this listener: quitting kills the user greenlet that may be running it.
        stop = environment.runner.stop if environment.web_ui else environment.runner.quit
        gevent.spawn(stop)


@events.test_start.add_listener
def on_test_start(environment, **_kwargs) -> None:
    process: Process = environment.loadwatch
    _refresh_settings(environment)
    process.workload = None
    process.user_numbers = count()
    settings = process.settings
    if process.state is None:
        # The master's shape sets users in a closed loop; in an open loop each worker reads the rate.
        process.schedule = plan_run(settings, run_users(environment.parsed_options)) if settings.request_rate else []
        process.load_start = None
    counted = settings.num_requests is not None or settings.warmup_requests > 0
    if isinstance(process.tickets, WorkerTickets):
        process.tickets.reset()
        process.quota = Quota(process.tickets if counted else None, settings.warmup_seconds)
    else:
        process.tickets = Tickets(settings.num_requests, settings.warmup_requests) if counted else None
        process.quota = Quota(process.tickets, settings.warmup_seconds)
    if process.state is not None:
        process.state.start(environment.host or "", settings.warmup_requests, settings.warmup_seconds)


@events.test_stop.add_listener
def on_test_stop(environment, **_kwargs) -> None:
    state = environment.loadwatch.state
    if state is not None:
        state.stop()


@events.reset_stats.add_listener
def on_reset_stats(**_kwargs) -> None:
    for process in _processes:
        if process.state is not None:
            process.state.recorder.samples.clear()


def _write_results(path: Path, result: dict, summary: str) -> None:
    """The results JSON and, beside it with .txt, the printed summary block."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for target, text in ((path, json.dumps(result, indent=2)), (path.with_suffix(".txt"), summary)):
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_text(text + "\n")
            os.replace(tmp, target)
    except OSError as exc:
        log.error("Cannot write results to %s: %s; the summary below is all there is", path, exc)
    else:
        log.info("Results written to %s", path)


@events.quitting.add_listener
def on_quitting(environment, **_kwargs) -> None:
    process: Process = environment.loadwatch
    state = process.state
    if state is None:
        return
    settings = process.settings
    result, verdicts = summarize(state.recorder.samples, settings.slo, state.stages())
    result = {"run_id": state.run_id, "target": state.target, **result,
              # Wall clock, warm-up included: the window a report reads from Prometheus.
              "started_at": state.started_at, "ended_at": state.stopped_at or time.time(),
              "warmup_requests": state.recorder.warmup_finished, "options": settings.public_options()}
    process.summary = format_block(result, verdicts)
    if settings.results_json:
        _write_results(settings.results_json, result, process.summary)
    if verdicts:
        environment.process_exit_code = 0 if all(v.passed for v in verdicts) else SLO_EXIT_CODE


@events.quit.add_listener
def on_quit(exit_code: int, **_kwargs) -> None:
    # Printed after Locust's own tables, so the figures people compare come last.
    for process in _processes:
        if process.summary:
            print(process.summary, flush=True)
            if exit_code == SLO_EXIT_CODE:
                print(f"SLO broken: exit code {SLO_EXIT_CODE}", flush=True)
