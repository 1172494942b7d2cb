"""`--shape step|ramp|spike|sweep` as a Locust LoadTestShape, ticked by the master or local runner.

In a closed loop a stage's level is the number of users; in an open loop (--request-rate) the
users stay at -u and the level is the run's request rate, which every process reads from the same
schedule once the master has told it when the schedule's clock started (the warm-up's end). Either
way a worker tells each request's stage from that start.
"""

from __future__ import annotations

import logging
import time

from locust import LoadTestShape
from locust.runners import MasterRunner

from loadwatch.loadgen.process import process_of, run_users
from loadwatch.loadgen.sending.schedule import level_now, plan_run
from loadwatch.loadgen.state import Phase

log = logging.getLogger(__name__)
LOAD_START = "loadwatch_load_start"  # master -> workers: the wall time the schedule's clock started


class OptionShape(LoadTestShape):
    use_common_options = True  # the web UI keeps its users field: the shape's peak in a closed loop

    def __init__(self, environment) -> None:
        super().__init__()
        self.environment = environment
        self.announced = False

    def reset_time(self) -> None:
        """Locust calls this as a run starts: plan it with the options the run starts with."""
        super().reset_time()
        process = process_of(self.environment)
        process.refresh(self.environment.parsed_options)
        try:
            schedule = plan_run(process.settings, run_users(self.environment.parsed_options))
        except ValueError as exc:
            log.error("loadwatch: %s; nothing to run", exc)
            schedule = []
        process.state.plan(schedule, "requests/s" if process.settings.request_rate else "users")
        self.announced = False

    def tick(self) -> tuple[int, float] | None:
        process = process_of(self.environment)
        state = process.state
        if not state.schedule:
            return None
        # The first tick comes before Locust's test_start, while the state is the last run's.
        load_start = state.load_started() if state.phase is Phase.RUNNING else None
        if load_start is not None and state.current() is None:
            return None
        if load_start is not None and not self.announced and isinstance(self.runner, MasterRunner):
            # On each worker's own clock: it tells each request's stage from it, and in an open loop its rate.
            for client in self.runner.clients.all:
                self.runner.send_message(LOAD_START, {"at": state.clocks.on_workers_clock(client.id, load_start)},
                                         client.id)
            self.announced = True
        if process.settings.request_rate:
            count = run_users(self.environment.parsed_options)
            return count, float(count)
        level = level_now(state.schedule, load_start, time.time())
        count = max(1, round(level))
        # Fast enough that a step is in place within a second of its start.
        return count, float(count)

