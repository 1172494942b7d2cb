"""The load generator watches itself: a Locust process whose event loop runs late, whose CPU is
spent, or whose open loop sends arrivals late adds its own delay to every figure and may not
deliver the load asked of it. Each process measures itself, exports it, and says so once.
"""

from __future__ import annotations

import logging
import time
from collections import deque

import gevent
import psutil

from loadwatch.catalogue import Client
from loadwatch.loadgen.recorder import Recorder

log = logging.getLogger(__name__)
TICK = 0.1  # seconds a probe greenlet sleeps; how late it wakes is the loop's lag
WINDOW = 5.0  # seconds a verdict looks back over
LAG_LIMIT = 0.02  # a wake-up later than this is a late one...
LATE_SHARE = 0.2  # ...and more than this share of late ones in the window is a saturated loop
CPU_LIMIT = 0.9  # of one core: a Locust process runs its users on one
STARVED_BELOW = 0.5  # a late loop in a process using less than this of a core waits for the CPU, not on itself
LATE_ARRIVALS = 10  # open-loop arrivals sent over ARRIVAL_LATE late within the window
ARRIVAL_LATE = 0.1
COUNT_EVERY = 1.0  # seconds between additions to the CPU counter: how busy a process was over a run is read from it


def verdict(lags: list[float], cpu_share: float, late_arrivals: int) -> str | None:
    """Why a process is saturated over a window, or None."""
    if lags and sum(lag > LAG_LIMIT for lag in lags) > LATE_SHARE * len(lags):
        late = f"its event loop ran late ({max(lags) * 1000:.0f} ms at worst)"
        if cpu_share < STARVED_BELOW:
            return f"{late} while it used {cpu_share:.0%} of a core: other processes on the machine took the CPU"
        return late
    if cpu_share > CPU_LIMIT:
        return f"it used {cpu_share:.0%} of a CPU core"
    if late_arrivals >= LATE_ARRIVALS:
        return f"{late_arrivals} open-loop arrivals went out over {ARRIVAL_LATE * 1000:.0f} ms late"
    return None


class Monitor:
    def __init__(self, recorder: Recorder, name: str, say: bool = True) -> None:
        self.recorder = recorder
        self.name = name
        self.say = say  # a worker's verdict is said by its master, which gets it with the reports
        self.loop: gevent.Greenlet | None = None

    def start(self) -> None:
        if self.loop is None:
            self.loop = gevent.spawn(self._run)

    def _run(self) -> None:
        process = psutil.Process()
        cpu = sum(process.cpu_times()[:2])
        lags: deque[float] = deque(maxlen=round(WINDOW / TICK))
        window_start, window_cpu, window_late = time.monotonic(), cpu, self.recorder.late_arrivals
        counted_at = window_start
        # The first window holds the process's start (imports on first use, the first connections):
        # measured and exported, but no verdict.
        judged = False
        while True:
            before = time.perf_counter()
            gevent.sleep(TICK)
            lag = max(0.0, time.perf_counter() - before - TICK)
            lags.append(lag)
            self.recorder.counts.observe(Client.EVENT_LOOP_LAG, (self.name,), lag)
            now = time.monotonic()
            if now - counted_at >= COUNT_EVERY:
                spent = sum(process.cpu_times()[:2])
                self.recorder.counts.inc(Client.CPU, (self.name,), spent - cpu)
                cpu, counted_at = spent, now
            if now - window_start < WINDOW:
                continue
            reason = verdict(list(lags), (cpu - window_cpu) / (counted_at - window_start),
                             self.recorder.late_arrivals - window_late) if judged else None
            judged = True
            if reason and self.name not in self.recorder.saturated:
                self.recorder.saturated[self.name] = reason
                if self.say:
                    log.warning("The load generator is a bottleneck: Locust process %s is saturated (%s). Its "
                                "figures include its own delays and it may not deliver the load asked; give it "
                                "more processes (--processes N), cores or machines.", self.name, reason)
            window_start, window_cpu, window_late = counted_at, cpu, self.recorder.late_arrivals
