"""The engine's state around given moments of a run: running, waiting, KV cache and preemptions,
from the sidecar's series in the run's Prometheus, read once over the run and looked up per request."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from loadwatch.catalogue import Engine, total
from loadwatch.prometheus import PrometheusAPI

STEP = 1.0  # seconds between the points read; the sidecar samples each second
# A request's state is read until this long after it ended: the scrape that saw its last second.
SCRAPE_LAG = 5.0

def gauges(selector: str = "") -> dict[str, str]:
    """The queries of the state, over the series `selector` picks (every engine's by default)."""
    return {
        "running": f"sum({Engine.REQUESTS_RUNNING}{{{selector}}})",
        "waiting": f"sum({Engine.REQUESTS_WAITING_MAX}{{{selector}}})",  # the sidecar's max between scrapes
        "kv_cache": f"max({Engine.KV_CACHE_USAGE_MAX}{{{selector}}})",
        "preemptions": f"sum({total(Engine.PREEMPTIONS)}{{{selector}}})",  # a counter: its rise over the window
    }


@dataclass(frozen=True)
class EngineState:
    running: float | None
    waiting: float | None
    kv_cache: float | None  # 0-1
    preemptions: float | None

    def words(self) -> str:
        """'6 running, 5 waiting, KV cache 100 %, 2 preemptions', with what is known."""
        parts = []
        if self.running is not None:
            parts.append(f"{self.running:.0f} running")
        if self.waiting is not None:
            parts.append(f"{self.waiting:.0f} waiting")
        if self.kv_cache is not None:
            parts.append(f"KV cache {100 * self.kv_cache:.0f} %")
        if self.preemptions is not None:
            parts.append("no preemption" if not self.preemptions else f"{self.preemptions:.0f} preemptions")
        return ", ".join(parts) or "no engine series in Prometheus"


class EngineTimeline:
    """The gauges over [start, end], read with one range query each: of every engine together, or of
    one `target` (a fleet's replica)."""

    def __init__(self, api: PrometheusAPI, start: float, end: float, target: str | None = None) -> None:
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        for name, expr in gauges(f'target="{target}"' if target else "").items():
            result = api.query_range(expr, start, end + SCRAPE_LAG, STEP)
            points = [(float(t), float(v)) for t, v in result[0]["values"]] if result else []
            self.series[name] = ([t for t, _ in points], [v for _, v in points])

    def _window(self, name: str, start: float, end: float) -> list[float]:
        times, values = self.series[name]
        return values[bisect_left(times, start):bisect_right(times, end + SCRAPE_LAG)]

    def around(self, start: float, end: float) -> EngineState:
        """The most running and waiting requests and the fullest KV cache seen from `start` to the
        scrape after `end`, and the preemptions in that time."""
        peak = {name: max(self._window(name, start, end), default=None) for name in ("running", "waiting", "kv_cache")}
        counter = self._window("preemptions", start - STEP, end)
        return EngineState(peak["running"], peak["waiting"], peak["kv_cache"],
                           counter[-1] - counter[0] if len(counter) > 1 else None)
