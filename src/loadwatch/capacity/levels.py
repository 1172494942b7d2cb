"""One level of a capacity search: a headless Locust run at one request rate (or user count),
watched while it runs and stopped early once it is clearly lost."""

from __future__ import annotations

import json
import logging
import math
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadwatch.catalogue import Engine
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.build import CLIENT_KEYS

log = logging.getLogger(__name__)
WATCH_SECONDS = 2.0
LOST_FACTOR = 2.0  # an SLO measured over twice its limit...
LOST_AFTER = 20  # ...over at least this many requests: the level is lost, whatever the rest would say
QUEUE_WINDOW = 20.0  # seconds over which a waiting queue that only grows...
QUEUE_GROWTH = 10  # ...by at least this much, to at least QUEUE_FLOOR, grows without bound
QUEUE_FLOOR = 20
OPEN_LOOP_USERS = 16  # arrival processes sharing an open-loop rate (each sends without waiting)


@dataclass
class Level:
    index: int
    value: float
    unit: str  # req/s or users
    name: str
    start: float = 0.0  # wall clock, after the level's warm-up: the window of its engine figures
    end: float = 0.0
    results: dict = field(default_factory=dict)
    engine: dict = field(default_factory=dict)
    stopped_early: str | None = None
    problem: str | None = None  # the level produced no results

    @property
    def passed(self) -> bool:
        slos = self.results.get("slo") or []
        measured = self.results.get("completed", 0) > 0
        return measured and not self.stopped_early and not self.problem and all(s["passed"] for s in slos)

    def as_dict(self) -> dict:
        return {"level": self.value, "unit": self.unit, "name": self.name, "passed": self.passed,
                "stopped_early": self.stopped_early, "problem": self.problem, "start": self.start, "end": self.end,
                "slo": self.results.get("slo", []), "saturated": self.results.get("saturated", {}),
                "client": {k: self.results.get(k) for k in CLIENT_KEYS}, "engine": self.engine}


def locust_arguments(level: Level, duration: float, warmup: float) -> list[str]:
    if level.unit == "users":
        users = int(level.value)
        load = ["-u", str(users), "-r", str(users)]
    else:
        users = max(1, min(OPEN_LOOP_USERS, math.ceil(level.value)))
        load = ["--request-rate", f"{level.value:g}", "-u", str(users), "-r", str(users)]
    return [*load, "-t", f"{math.ceil(duration + warmup)}s", "--warmup-seconds", f"{warmup:g}",
            "--stage-name", level.name, "--checkpoint-interval", f"{WATCH_SECONDS:g}", "--stop-timeout", "10"]


def lost(partial: dict) -> str | None:
    """Why a level is clearly lost from its checkpoint, or None."""
    if partial.get("saturated"):
        return "the load generator is saturated: " + "; ".join(partial["saturated"].values())
    if partial.get("completed", 0) + partial.get("failed", 0) < LOST_AFTER:
        return None
    for slo in partial.get("slo", []):
        if slo["measured"] is not None and slo["measured"] > LOST_FACTOR * slo["limit"] > 0:
            return f"{slo['name']} at {slo['measured']:.4g}, over {LOST_FACTOR:g} times its limit {slo['limit']:g}"
    return None


def queue_unbounded(api: PrometheusAPI | None, since: float) -> str | None:
    """Whether the engine's waiting queue has only grown over the last QUEUE_WINDOW seconds."""
    now = time.time()
    if api is None or now - since < QUEUE_WINDOW:
        return None
    try:
        result = api.query_range(f"sum({Engine.REQUESTS_WAITING})", now - QUEUE_WINDOW, now, WATCH_SECONDS)
    except PrometheusError:
        return None
    values = [float(v) for _, v in result[0]["values"]] if result else []
    if len(values) < 4 or values[-1] < QUEUE_FLOOR or values[-1] - values[0] < QUEUE_GROWTH:
        return None
    if all(b >= a for a, b in zip(values, values[1:], strict=False)):
        return f"the engine's waiting queue grows without bound ({values[0]:.0f} to {values[-1]:.0f} in " \
               f"{QUEUE_WINDOW:.0f} s)"
    return None


def run_level(level: Level, command: list[str], env: dict[str, str], results: Path, api: PrometheusAPI | None,
              warmup: float, log_file: Path) -> Level:
    """Run Locust for the level and fill it in; Ctrl-C stops the level and is raised again."""
    partial = results.with_name(results.stem + ".partial.json")
    began = time.time()
    with open(log_file, "w") as out:
        locust = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            while locust.poll() is None:
                time.sleep(WATCH_SECONDS)
                reason = None
                if partial.exists():
                    try:
                        reason = lost(json.loads(partial.read_text()))
                    except (OSError, ValueError):
                        reason = None
                reason = reason or queue_unbounded(api, began + warmup)
                if reason and level.stopped_early is None:
                    level.stopped_early = reason
                    locust.send_signal(signal.SIGTERM)  # Locust's own quit: it writes what it measured
            locust.wait()
        except KeyboardInterrupt:
            locust.send_signal(signal.SIGINT)
            locust.wait(timeout=60)
            raise
    level.start, level.end = began + warmup, time.time()
    try:
        level.results = json.loads(results.read_text())
    except (OSError, ValueError):
        level.problem = f"Locust wrote no results (exit code {locust.returncode}; see {log_file})"
    return level


def locust_base(locustfile: Path, results: Path, metrics_port: int, slos: list[str], extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "--only-summary",
            "--metrics-port", str(metrics_port), "--results-json", str(results), *[f"--slo={s}" for s in slos],
            *extra]
