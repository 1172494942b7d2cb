"""loadwatch's handlers for each Locust role, as Locust itself splits them.

A local runner measures and sums up on its own. A master sums up what its workers report, deals
out --num-requests tickets and collects every worker's last report at the stop. A worker measures,
ships deltas to the master and follows the master's clock. Each role registers named handlers on
the environment's events when its process starts.
"""

from __future__ import annotations

import gc
import logging
import time
from importlib.metadata import version
from pathlib import Path

import gevent
from locust.env import Environment
from locust.exception import RPCError
from locust.runners import HEARTBEAT_LIVENESS, STATE_MISSING, STATE_RUNNING, STATE_SPAWNING, MasterRunner, WorkerRunner

from loadwatch.loadgen import exposition, results
from loadwatch.loadgen.clocks import PING, PINGS_AT_HELLO, PONG
from loadwatch.loadgen.keeper import Keeper
from loadwatch.loadgen.monitor import Monitor
from loadwatch.loadgen.process import BAD_WORKLOAD, Process, attach, run_users
from loadwatch.loadgen.recorder import REPORT_KEY
from loadwatch.loadgen.replica_watch import ReplicaWatch
from loadwatch.loadgen.sending.quota import ASK, FINAL, FLUSH, GRANT, Quota, Tickets, WorkerTickets
from loadwatch.loadgen.sending.schedule import plan_run
from loadwatch.loadgen.sending.shape import LOAD_START, OptionShape
from loadwatch.loadgen.state import Phase, RunState
from loadwatch.loadgen.ticker import every
from loadwatch.loadgen.workers import LOOK_EVERY, host_of
from loadwatch.settings import LoadSettings
from loadwatch.workloads.datasets import DATASETS

log = logging.getLogger(__name__)
VERSION = version("loadwatch")
HELLO = "loadwatch_hello"  # a worker's first message: its loadwatch version, run name and locustfile
GC_YOUNG = 50_000  # container allocations between two collections of the youngest generation (Python's: 700)
TICKET_BATCH = 4  # tickets a worker asks for at a time: few messages, little held back at the end
CLOCK_PING_EVERY = 5.0  # seconds: a ping with a shorter round trip may come at any time
# At the stop, beyond --stop-timeout: how long the master waits for every worker's last report, and
# how long a worker lets its requests in flight finish before it sends it (less, so that it comes in
# time). A last report sent with requests in flight left them to a later report, whose records came
# after the master had closed its records file: 8 records short in every timed run of 8 users.
FINAL_WAIT, FINAL_GRACE = 10.0, 5.0


def hello(environment, run_name: str) -> dict:
    """What a worker tells its master of itself, and the master compares with its own. The locustfile
    by its file names (paths differ across machines); none for a worker that takes its master's (-f -)."""
    files = str(getattr(environment.parsed_options, "locustfile", "") or "")
    names = "" if files in ("", "-") else ",".join(sorted(Path(f).name for f in files.split(",")))
    return {"version": VERSION, "run_name": run_name, "locustfile": names}


def _scenarios(environment: Environment) -> list[str]:
    return sorted({getattr(cls, "scenario", cls.__name__) for cls in environment.user_classes}) or ["chat"]


class Role:
    """What every role does: record each request, follow the run's start, stop and stats resets,
    and watch its own process."""

    name = "local"  # the process in the load generator's own metrics
    says_saturation = True  # logs its own saturation; a worker's is said by its master, from its reports

    def __init__(self, environment: Environment, process: Process) -> None:
        self.environment = environment
        self.process = process

    def install(self) -> None:
        # Python collects its youngest generation every 700 container allocations, and each streamed
        # chunk's JSON makes a few: at thousands of chunks a second that was 3.6 % of the process's
        # CPU (py-spy), most of it in the older generations the young ones are promoted to.
        gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
        Monitor(self.process.recorder, self.name, say=self.says_saturation).start()
        events = self.environment.events
        events.request.add_listener(self.process.recorder.on_request)
        events.test_start.add_listener(self.on_test_start)
        events.reset_stats.add_listener(self.on_reset_stats)

    def on_test_start(self, **_kwargs) -> None:
        self.process.new_run(self.environment.parsed_options)

    def on_reset_stats(self, **_kwargs) -> None:
        pass


class Summing(Role):
    """The master or a local runner: the run's own state, its metrics endpoint, shape and summary."""

    def install(self) -> None:
        super().install()
        self.keeper = Keeper(self.process)
        events = self.environment.events
        events.test_stop.add_listener(self.on_test_stop)
        events.quitting.add_listener(self.on_quitting)
        events.quit.add_listener(self.on_quit)
        settings = self.process.settings
        exposition.serve(self.environment, self.process.state, settings.metrics_host, settings.metrics_port,
                         lambda: self.process.settings)
        if settings.replica and settings.engine_metrics:
            self.process.replica_watch = ReplicaWatch(settings.engine_metrics, settings.replica_names())
            self.process.replica_watch.start()
        if settings.shape:
            shape = OptionShape(self.environment)
            shape.runner = self.environment.runner
            self.environment.shape_class = shape

    def on_test_start(self, **kwargs) -> None:
        super().on_test_start(**kwargs)
        process, settings = self.process, self.process.settings
        process.tickets = Tickets(settings.num_requests, settings.warmup_requests) if process.counted() else None
        process.quota = Quota(process.tickets, settings.warmup_seconds)
        process.state.start(self.environment.host or "", settings.warmup_requests, settings.warmup_seconds,
                            getattr(self.environment.parsed_options, "num_users", None))
        self.keeper.start()

    def on_test_stop(self, **_kwargs) -> None:
        self.process.state.stop()
        self.keeper.stop()
        if self.environment.web_ui is not None:
            # A run from the web UI has its files at its stop, to download there; the process may
            # run more (each rewrites them) before it quits and writes the last one's again.
            results.finish(self.process)
            results.make_page(self.process.settings)

    def on_reset_stats(self, **_kwargs) -> None:
        self.process.recorder.reset_samples()

    def on_quitting(self, environment: Environment, **_kwargs) -> None:
        self.keeper.stop()
        exit_code = results.finish(self.process)
        if self.process.state.workers.lost:  # incomplete: what it measured cannot be judged whole
            exit_code = results.INCOMPLETE_EXIT_CODE
        # Bad input stands: the run never measured what it was asked to.
        if exit_code is not None and environment.process_exit_code != results.BAD_INPUT_EXIT_CODE:
            environment.process_exit_code = exit_code

    def on_quit(self, exit_code: int, **_kwargs) -> None:
        results.print_summary(self.process, exit_code)

    def stop_when_done(self, **_kwargs) -> None:
        """End the run once --num-requests measured requests have finished, everywhere."""
        process = self.process
        wanted = process.settings.num_requests
        done = process.recorder.finished + process.recorder.skipped + process.state.workers.written_off()
        if wanted and process.state.phase is Phase.RUNNING and done >= wanted:
            process.state.phase = Phase.STOPPING
            runner = self.environment.runner
            assert runner is not None
            # Not from inside this listener: quitting kills the user greenlet that may be running it.
            gevent.spawn(runner.stop if self.environment.web_ui else runner.quit)


class Local(Summing):
    def install(self) -> None:
        super().install()
        self.environment.events.request.add_listener(self.stop_when_done)
        self.process.done_check = self.stop_when_done


class Master(Summing):
    name = "master"

    def __init__(self, environment: Environment, process: Process) -> None:
        super().__init__(environment, process)
        self.states: dict[str, str] = {}  # each worker's Locust state at the last look
        self.greeted: set[str] = set()  # workers that said hello and were let in

    def install(self) -> None:
        super().install()
        runner = self.environment.runner
        assert isinstance(runner, MasterRunner)
        events = self.environment.events
        events.worker_report.add_listener(self.process.state.on_worker_report)
        events.worker_report.add_listener(self.stop_when_done)
        events.test_stopping.add_listener(self.on_test_stopping)
        runner.register_message(ASK, self.grant_tickets)
        runner.register_message(FINAL, self.take_final_report)
        runner.register_message(HELLO, self.check_worker)
        runner.register_message(PONG, self.take_pong)
        runner.register_message(BAD_WORKLOAD, self.end_on_bad_workload)
        every(LOOK_EVERY, self.watch_heartbeats)
        every(CLOCK_PING_EVERY, self.ping_all)

    def ping(self, worker: str, times: int = 1) -> None:
        runner = self.environment.runner
        assert isinstance(runner, MasterRunner)
        for i in range(times):
            if i:
                gevent.sleep(0.05)
            try:
                runner.send_message(PING, {"t0": time.time()}, worker)
            except RPCError:  # a worker gone since: its heartbeats say so, and its offset stays as it was
                return

    def ping_all(self) -> None:
        runner = self.environment.runner
        assert isinstance(runner, MasterRunner)
        for client in runner.clients.all:
            # Not one that has yet to say hello: it cannot answer before its handlers are in.
            if client.state != STATE_MISSING and client.id in self.greeted:
                self.ping(client.id)

    def end_on_bad_workload(self, msg, **_kwargs) -> None:
        """A worker cannot build the run's workload (the server cannot take it): every worker would
        say the same, so the run ends, as a local runner's does, with the code of bad input."""
        if self.environment.process_exit_code != results.BAD_INPUT_EXIT_CODE:
            log.error("Worker %s %s: the run ends", msg.node_id, msg.data["why"])
            self.environment.process_exit_code = results.BAD_INPUT_EXIT_CODE
            gevent.spawn(self.environment.runner.quit)  # type: ignore[union-attr]

    def take_pong(self, msg, **_kwargs) -> None:
        self.process.state.clocks.pong(msg.node_id, msg.data["t0"], msg.data["tw"], time.time())

    def watch_heartbeats(self) -> None:
        """Each worker's last heartbeat: a lost one's requests are counted up to then. Locust sets a
        worker's count to HEARTBEAT_LIVENESS at each heartbeat and takes one off a second. A worker
        that falls silent is named as it goes missing, and as lost when Locust removes it a minute
        later (one that quits goes without being missing first)."""
        runner = self.environment.runner
        assert isinstance(runner, MasterRunner)
        now, workers = time.time(), self.process.state.workers
        states = {client.id: client.state for client in runner.clients.all}
        for client in runner.clients.all:
            if client.state != STATE_MISSING:
                workers.heartbeat(client.id, now - (HEARTBEAT_LIVENESS - client.heartbeat),
                                  sum(client.user_classes_count.values()))
            elif self.states.get(client.id) != STATE_MISSING:
                log.warning("Worker %s on host %s is missing (no heartbeat for %d s): the run goes on with the "
                            "rest; its last report is awaited at the stop", client.id, host_of(client.id),
                            HEARTBEAT_LIVENESS)
        for gone in self.states.keys() - states.keys():
            if self.states[gone] == STATE_MISSING:
                workers.remove(gone)
                log.error("Worker %s on host %s is lost: silent for a minute, Locust removed it; the run goes on "
                          "with the rest, and its requests since its last report will be counted as unknown",
                          gone, host_of(gone))
        self.states = states

    def check_worker(self, msg, **_kwargs) -> None:
        """A worker of another loadwatch version measures and reports differently, and one of another
        run (a --run-name or locustfile of its own, not this master's) came to the wrong master: it is
        sent away. A worker given no --run-name takes the master's, as Locust ships it the options."""
        theirs = msg.data if isinstance(msg.data, dict) else {}
        ours = hello(self.environment, self.process.settings.run_name)
        if theirs.get("version") != VERSION:
            why = f"runs loadwatch {theirs.get('version')}, this master {VERSION} (its figures would not add up " \
                  "with the others')"
        elif theirs.get("run_name") and theirs["run_name"] != ours["run_name"]:
            why = f"belongs to run {theirs.get('run_name')!r}, this master to {ours['run_name']!r}"
        elif theirs.get("locustfile") and ours["locustfile"] and theirs["locustfile"] != ours["locustfile"]:
            why = f"runs {theirs['locustfile']}, this master {ours['locustfile']}"
        else:
            self.greeted.add(msg.node_id)
            gevent.spawn(self.ping, msg.node_id, PINGS_AT_HELLO)  # its clock, before its first record
            return
        log.error("Worker %s %s: it is told to quit", msg.node_id, why)
        self.environment.runner.send_message("quit", None, msg.node_id)  # type: ignore[union-attr]

    def grant_tickets(self, msg, **_kwargs) -> None:
        tickets = self.process.tickets
        kinds = tickets.take(msg.data["n"]) if isinstance(tickets, Tickets) else []
        self.process.state.workers.granted(msg.node_id, len(kinds))
        runner = self.environment.runner
        if DATASETS[self.process.settings.dataset].timed:  # the replay's clock, before the entries it times
            state = self.process.state
            at = state.clocks.on_workers_clock(msg.node_id, state.load_started())
            runner.send_message(LOAD_START, {"at": at}, msg.node_id)  # type: ignore[union-attr]
        runner.send_message(GRANT, {"kinds": kinds}, msg.node_id)  # type: ignore[union-attr]

    def take_final_report(self, msg, **_kwargs) -> None:
        self.process.state.on_final_report(msg.node_id, msg.data)

    def on_test_stopping(self, **_kwargs) -> None:
        """Collect every worker's last requests before Locust's stop or quit goes out.

        On quit, Locust's master waits only half a second for the workers' last stats, while a worker
        first lets its in-flight requests finish (--stop-timeout): those requests would be lost.
        """
        runner = self.environment.runner
        assert isinstance(runner, MasterRunner)
        state = self.process.state
        # A worker marked missing is often only late with its heartbeats (a busy CPU): it still runs
        # users and answers, so its last requests are awaited as well; so are those of a worker Locust
        # removed after a minute of silence, which may have come back since.
        workers = {c.id for c in runner.clients.all} | state.workers.known()
        if workers and self.environment.process_exit_code != results.BAD_INPUT_EXIT_CODE:
            state.expect_final_reports(workers)
            runner.send_message(FLUSH, {})
            if not state.finals_done.wait(timeout=(self.environment.stop_timeout or 0) + FINAL_WAIT):
                lost_workers = state.workers.lose(state.finals_pending, isinstance(self.process.tickets, Tickets),
                                                  time.time())
                for lost in lost_workers:
                    heard = time.strftime("%H:%M:%S", time.localtime(lost["last_heard"])) if lost["last_heard"] \
                        else "never"
                    log.error("Worker %s on host %s is lost (last heard %s): %d requests' outcomes unknown (%s); "
                              "the run is incomplete", lost["worker"], lost["host"], heard, lost["unknown"],
                              lost["unknown_counted_as"])
        state.clocks.warn_uncertain()


class Worker(Role):
    says_saturation = False

    def install(self) -> None:
        runner = self.environment.runner
        assert isinstance(runner, WorkerRunner)
        self.name = str(runner.worker_index)
        super().install()
        self.process.tickets = WorkerTickets(runner, TICKET_BATCH)
        self.process.recorder.worker = runner.client_id
        self.environment.events.report_to_master.add_listener(self.add_report)
        runner.register_message(FLUSH, self.send_final_report, concurrent=True)
        runner.register_message(LOAD_START, self.follow_load_start)
        runner.register_message(PING, lambda msg, **_kw: runner.send_message(PONG, {"t0": msg.data["t0"],
                                                                                  "tw": time.time()}))
        runner.send_message(HELLO, hello(self.environment, self.process.settings.run_name))
        # Locust connects a worker to its master before it fires init: the master's spawn can come
        # first, firing test_start before this handler exists. The users are spawned only after init
        # returns, so catching up here still comes before their first request.
        if runner.worker_state in (STATE_SPAWNING, STATE_RUNNING):
            self.on_test_start()

    def add_report(self, data: dict, **_kwargs) -> None:
        data[REPORT_KEY] = self.process.recorder.report()

    def follow_load_start(self, msg, **_kwargs) -> None:
        self.process.state.follow(msg.data["at"])

    def on_test_start(self, **kwargs) -> None:
        super().on_test_start(**kwargs)
        process, settings = self.process, self.process.settings
        # The schedule tells each request's stage; in an open loop each worker also reads its rate.
        process.state.start_replica(plan_run(settings, run_users(self.environment.parsed_options)))
        assert isinstance(process.tickets, WorkerTickets)
        process.tickets.reset()
        process.quota = Quota(process.tickets if process.counted() else None, settings.warmup_seconds)

    def send_final_report(self, **_kwargs) -> None:
        """Start nothing new, let what is in flight finish, then report it all to the master."""
        process = self.process
        if process.quota is not None:
            process.quota.closed = True
        deadline = time.monotonic() + (self.environment.stop_timeout or 0) + FINAL_GRACE
        while sum(process.recorder.in_flight.values()) > 0 and time.monotonic() < deadline:
            gevent.sleep(0.05)
        self.environment.runner.send_message(FINAL, process.recorder.report())  # type: ignore[union-attr]


def install(environment: Environment, settings: LoadSettings, authorization: str | None = None) -> Process:
    """loadwatch's process for this Locust process, its role's handlers registered."""
    runner = environment.runner
    role: type[Role]
    if isinstance(runner, WorkerRunner):
        role, state = Worker, RunState([], "", replica=True)
    else:
        role = Master if isinstance(runner, MasterRunner) else Local
        state = RunState(_scenarios(environment), environment.host or "")
    process = Process(settings, state, authorization)
    attach(environment, process)
    role(environment, process).install()
    return process
