"""One thread per target: fetch /metrics every interval, keep the window, log state changes once."""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field

from prometheus_client.core import Metric

from loadwatch.exporter.normalize import Snapshot, normalize
from loadwatch.exporter.settings import Target
from loadwatch.exporter.window import peaks, ratios

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reading:
    """The latest state of one target, swapped in whole so a scrape never sees half of it."""

    up: bool
    duration: float
    families: list[Metric] = field(default_factory=list)


class TargetSampler:
    def __init__(self, target: Target, interval: float, window: float, timeout: float) -> None:
        self.target, self.interval, self.timeout = target, interval, timeout
        self.window: deque[tuple[float, Snapshot]] = deque()
        self.window_seconds = window
        self.reading = Reading(up=False, duration=0.0)
        self._was_up: bool | None = None
        self._stop = threading.Event()

    def fetch(self) -> str:
        with urllib.request.urlopen(self.target.metrics_url, timeout=self.timeout) as response:
            return response.read().decode("utf-8", "replace")

    def sample_once(self) -> Reading:
        started = time.monotonic()
        try:
            snapshot = normalize(self.fetch(), self.target.name)
        except (OSError, urllib.error.URLError, ValueError, UnicodeError) as exc:
            self.window.clear()
            self._note(False, exc)
            self.reading = Reading(up=False, duration=time.monotonic() - started)
            return self.reading
        self.window.append((started, snapshot))
        while self.window and self.window[0][0] < started - self.window_seconds:
            self.window.popleft()
        snapshots = [s for _, s in self.window]
        families = [*snapshot.families.values(), *peaks(snapshots, self.target.name),
                    *ratios(snapshots, self.target.name)]
        self._note(True, None)
        self.reading = Reading(up=True, duration=time.monotonic() - started, families=families)
        return self.reading

    def _note(self, up: bool, error: Exception | None) -> None:
        if up == self._was_up:
            return
        if up:
            log.info("target %s (%s) is up", self.target.name, self.target.metrics_url)
        else:
            log.warning("target %s (%s) is down: %s", self.target.name, self.target.metrics_url, error)
        self._was_up = up

    def run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def start(self) -> None:
        threading.Thread(target=self.run, name=f"sample-{self.target.name}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
