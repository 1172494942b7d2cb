"""The web UI's charts over time: one point a second, kept on the master (or local runner) for
the last hour, so a page reloaded during a run gets its history back.

A point's client figures are over the last WINDOW seconds, as Locust's own "current" figures
are: the sketches' buckets now minus those of a copy taken then, so a point costs the same
however many requests the run has seen. Stages are marked where the stage changes.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable
from itertools import takewhile

from loadwatch.loadgen.state import RunState
from loadwatch.loadgen.ticker import every
from loadwatch.metrics.counts import MetricCounts
from loadwatch.metrics.definitions import ARRIVAL_LAG
from loadwatch.metrics.samples import Series
from loadwatch.metrics.ttft_split import slowest

INTERVAL = 1.0  # seconds between points
WINDOW = 10.0  # seconds each point's client figures cover
POINTS = 3600  # an hour of points; older ones are dropped
SLOWEST = 10  # of the recorder's recent requests, the slowest the tab lists
CHARTED = ("ttft", "tpot", "itl")


def _window(now: Series, then: Series | None, seconds: float) -> dict:
    """The client figures of the requests that finished between `then` and `now` (cumulative)."""
    out: dict = {}
    for metric in CHARTED:
        sketch = now.latency[metric].since(then.latency[metric]) if then else now.latency[metric]
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            value = sketch.quantile(q)
            out[f"{metric}_{label}"] = None if value is None else round(value * 1000, 2)
    fresh = then is None or now.completed < then.completed  # a new run emptied the samples
    tokens = now.completion_tokens - (0 if fresh or then is None else then.completion_tokens)
    failed = now.failures - (Counter() if fresh or then is None else then.failures)
    out["output_tps"] = round(tokens / seconds, 2) if seconds > 0 else None
    out["failures"] = {reason: round(n / seconds, 3) for reason, n in failed.items()} if seconds > 0 else {}
    rejected = now.rejected - (0 if fresh or then is None else then.rejected)
    out["rejected_per_s"] = round(rejected / seconds, 3) if seconds > 0 else None
    return out


def _lag_so_far(counts: MetricCounts) -> tuple[float, int]:
    """(sum, count) of the schedule lags so far: an open loop's or a trace replay's sends."""
    hists = [h for _, h in counts.histograms_named(ARRIVAL_LAG.name)]
    return sum(h.total for h in hists), sum(sum(h.counts) for h in hists)


def _mean_lag_ms(now: tuple[float, int], then: tuple[float, int]) -> float | None:
    sent = now[1] - then[1]
    return round((now[0] - then[0]) / sent * 1000, 2) if sent > 0 else None


class History:
    def __init__(self, state: RunState, user_count: Callable[[], int], engine=None) -> None:
        self.state = state
        self.user_count = user_count
        self.engine = engine  # an EngineWatch, or None without --engine-metrics
        self.points: deque[dict] = deque(maxlen=POINTS)
        self.stages: deque[dict] = deque(maxlen=POINTS)  # {t, name} where the stage changed
        self._copies: deque[tuple[float, Series, tuple[float, int]]] = deque()
        self._stage = ""
        self.slowest: list[dict] = []

    def sample(self, now: float | None = None) -> dict:
        now = time.time() if now is None else now
        total = self.state.recorder.samples.total()
        copy = Series()
        copy.merge(total)  # the samples keep changing: the window needs them as they are now
        lag = _lag_so_far(self.state.recorder.counts)
        self._copies.append((now, copy, lag))
        while len(self._copies) > 2 and self._copies[1][0] <= now - WINDOW:
            self._copies.popleft()
        then_at, then, lag_then = self._copies[0]
        stage = self.state.stage
        if stage != self._stage and stage != "idle":  # idle, before a first run, marks nothing
            self.stages.append({"t": now, "name": stage})
        self._stage = stage
        point = {"t": round(now, 3), "stage": stage, "users": self.user_count(),
                 "in_flight": sum(self.state.in_flight().values()),
                 **_window(total, then if then is not copy else None, now - then_at if then is not copy else 0.0),
                 "lag_ms": _mean_lag_ms(lag, lag_then),
                 "engine": self.engine.latest if self.engine else None}
        self.points.append(point)
        self.slowest = slowest(list(self.state.recorder.recent), SLOWEST)
        return point

    def as_dict(self, since: float | None = None) -> dict:
        """The history, or only its points after `since` (a page's poll: a few from the end, not
        a copy of the hour)."""
        if since is None:
            points = list(self.points)
        else:
            newer = list(takewhile(lambda p: p["t"] > since, reversed(self.points)))
            points = newer[::-1]
        return {"interval": INTERVAL, "window": WINDOW, "engine_url": self.engine.url if self.engine else None,
                "points": points, "stages": list(self.stages), "slowest": self.slowest}

    def start(self) -> None:
        every(INTERVAL, self.sample)
