"""One thread per target: fetch /metrics every interval, keep the window, log state changes once.

Whatever a target sends, a sample ends in a reading: up with its families, or down with the
reason counted. A reading carries its time, so one that is too old is served as down, never as
current; a sampler thread that died anyway is started again by the next scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field

from prometheus_client.core import Metric

from loadwatch.exporter.fetch import FetchError, fetch
from loadwatch.exporter.normalize import Snapshot, normalize
from loadwatch.exporter.router import normalize_router
from loadwatch.exporter.settings import Target
from loadwatch.exporter.window import peaks, ratios

log = logging.getLogger(__name__)
STALE_INTERVALS = 3  # a reading older than this many intervals (past the sample's own deadline) is stale


@dataclass(frozen=True)
class Reading:
    """The latest state of one target, swapped in whole so a scrape never sees half of it."""

    up: bool
    duration: float
    at: float = field(default_factory=time.monotonic)  # when the sample ended
    families: list[Metric] = field(default_factory=list)


class TargetSampler:
    def __init__(self, target: Target, interval: float, window: float, timeout: float) -> None:
        self.target, self.interval, self.timeout = target, interval, timeout
        self.window: deque[tuple[float, Snapshot]] = deque()
        self.window_seconds = window
        self.reading = Reading(up=False, duration=0.0)
        self.errors: Counter[str] = Counter()  # failed samples by reason, since the start
        self._was_up: bool | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def fetch(self) -> str:
        return fetch(self.target.metrics_url, self.timeout).decode("utf-8", "replace")

    def families(self, text: str, started: float) -> list[Metric]:
        """The sample's families: vLLM's normalised, with the window's peaks and ratios."""
        try:
            snapshot = normalize(text, self.target.name)
        except Exception as exc:  # the parser's errors on garbage are of many kinds
            raise FetchError("parse", f"not vLLM's metrics ({type(exc).__name__}: {exc})") from None
        self.window.append((started, snapshot))
        while self.window and self.window[0][0] < started - self.window_seconds:
            self.window.popleft()
        snapshots = [s for _, s in self.window]
        return [*snapshot.families.values(), *peaks(snapshots, self.target.name), *ratios(snapshots, self.target.name)]

    def sample_once(self) -> Reading:
        started = time.monotonic()
        try:
            families = self.families(self.fetch(), started)
        except Exception as exc:
            reason = exc.reason if isinstance(exc, FetchError) else "internal"
            if reason == "internal":
                log.exception("target %s: unexpected error in a sample", self.target.name)
            self.errors[reason] += 1
            self.window.clear()
            self._note(False, exc)
            self.reading = Reading(up=False, duration=time.monotonic() - started)
            return self.reading
        self._note(True, None)
        self.reading = Reading(up=True, duration=time.monotonic() - started, families=families)
        return self.reading

    def current(self) -> Reading:
        """The reading to serve now: down when the last one is too old to be the target's state."""
        reading = self.reading
        if reading.up and time.monotonic() - reading.at > self.timeout + STALE_INTERVALS * self.interval:
            return Reading(up=False, duration=reading.duration, at=reading.at)
        return reading

    def _note(self, up: bool, error: Exception | None) -> None:
        if up == self._was_up:
            return
        if up:
            log.info("target %s (%s) is up", self.target.name, self.target.shown_url)
        else:
            log.warning("target %s (%s) is down: %s", self.target.name, self.target.shown_url, error)
        self._was_up = up

    def run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"sample-{self.target.name}", daemon=True)
        self._thread.start()

    def ensure_running(self) -> None:
        """Start the thread again if it died (it should not: sample_once catches everything)."""
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            log.error("target %s: the sampler thread had stopped; started again", self.target.name)
            self.start()

    def stop(self) -> None:
        self._stop.set()


class RouterSampler(TargetSampler):
    """A fleet's router: its metrics as they are (counters and present state), no window of its own;
    each replica it names by URL is named as the target with that URL (`replicas`: URL -> name)."""

    def __init__(self, target: Target, replicas: dict[str, str], interval: float, window: float,
                 timeout: float) -> None:
        super().__init__(target, interval, window, timeout)
        self.replicas = replicas

    def families(self, text: str, started: float) -> list[Metric]:
        try:
            return normalize_router(text, self.target.name, self.replicas)
        except Exception as exc:  # the parser's errors on garbage are of many kinds
            raise FetchError("parse", f"not a router's metrics ({type(exc).__name__}: {exc})") from None
