"""How long a cell must run on this server: derived from the warm-up run of its workload on its
arm, so that a slow server (a big model, long prompts, a saturated engine, a busy machine) still
completes enough requests in every cell to judge, and says so in words when it does not.

A closed loop of u users with requests of E2E e completes about u (D - w) / e requests in D
seconds after w of warm-up; an open loop of rate r about r (D - w - e). A cell needs
MIN_COMPLETED of them, and the time for the last ones sent to finish.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from loadwatch.loadrun.locust import Load
from loadwatch.metrics.results import latency_key

MIN_COMPLETED = 20  # requests a cell must complete for its median and p90 to mean something
MIN_STOP_TIMEOUT = 10.0
# The warm-up's p90 rests on few requests, and a cell shares the machine with whatever else runs:
# 1.0 left a busy machine's cells at 18 and 19 of their 20.
MARGIN = 1.5


@dataclass(frozen=True)
class Pace:
    e2e: float  # seconds a request takes on this arm, from the warm-up run (its p90)
    completed: int  # requests the warm-up run completed

    @classmethod
    def of(cls, results: dict, seconds: float) -> Pace:
        """From a warm-up run's results; a run that completed nothing says a request takes longer
        than the run itself."""
        e2e = results.get(latency_key("e2el", "p90")) or results.get(latency_key("e2el", "median"))
        completed = int(results.get("completed") or 0)
        return cls(e2e / 1000 if completed and e2e else seconds, completed)

    def seconds(self, users: int, rate: float | None, warmup: float) -> float:
        """The shortest cell that completes MIN_COMPLETED requests with time for the last to finish,
        each taking MARGIN times the pace measured."""
        e2e = MARGIN * self.e2e
        sending = MIN_COMPLETED / rate if rate else MIN_COMPLETED * e2e / users
        return math.ceil(warmup + sending + e2e)

    @property
    def stop_timeout(self) -> float:
        """Time for the requests in flight at the run's end to finish and be counted."""
        return max(MIN_STOP_TIMEOUT, math.ceil(2 * self.e2e))


def too_few(results: dict, load: Load, pace: Pace | None) -> str | None:
    """Why the results of a cell run at `load` cannot be judged, in words, or None."""
    completed = int(results.get("completed") or 0)
    if completed >= MIN_COMPLETED:
        return None
    e2e = results.get(latency_key("e2el", "median"))
    seen = f"median E2E {e2e / 1000:.1f} s" if e2e else "no request finished"
    slowest = Pace(max(pace.e2e, (e2e or 0) / 1000), 0) if pace else None
    would = (f"; --duration {slowest.seconds(load.users, load.rate, load.warmup_seconds):.0f}s would do"
             if slowest else "")
    return (f"too few requests to judge: {completed} of {MIN_COMPLETED} completed in {load.duration:.0f} s "
            f"({seen}){would}")
