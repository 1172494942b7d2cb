"""Shared fixtures: free ports, the fake SSE server and Locust runs as subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# Locust patches the standard library with gevent on import; that must happen before a test module
# imports grafana-client, whose niquests builds SSL contexts at import, or Locust's recurses.
import locust  # noqa: F401, I001
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[1]


TIERS = ("unit", "integration", "e2e")  # tests/<tier>/...: the directory sets the tier and its marker
UNIT_SECONDS = 1.0
WAITED_SECONDS = 10 * UNIT_SECONDS  # wall time: CPU time plus a busy machine's waits, but no sleeping


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        tier = _tier(item)
        if tier is None:
            item.add_marker(pytest.mark.misplaced)
        elif tier != "unit":
            item.add_marker(getattr(pytest.mark, tier))


def _tier(item) -> str | None:
    parts = Path(item.path).relative_to(REPO / "tests").parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request, monkeypatch):
    """A unit test that starts a process (Locust, Prometheus, promtool, a fake server) belongs in
    tests/integration: the unit tier must answer in seconds on any machine."""
    if request.node.get_closest_marker("misplaced"):
        pytest.fail(f"{request.node.path} is in no tier: move it under tests/unit, tests/integration or tests/e2e")
    if _tier(request.node) != "unit":
        return

    def refuse(*args, **kwargs):
        pytest.fail("a unit test started a process: move it to tests/integration", pytrace=False)

    for popen in {subprocess.Popen, *(sys.modules[m].Popen for m in ("gevent.subprocess",) if m in sys.modules)}:
        monkeypatch.setattr(popen, "_execute_child", refuse)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """The test's own CPU time, apart from its wall time: on a busy machine (CI beside other jobs, a
    tier run beside the engine's) a test waits for a core through no fault of its own (a plot that
    takes 0.6 s took 2.5 s of wall time with both cores busy)."""
    began = time.process_time()
    yield
    item.user_properties.append(("cpu_seconds", time.process_time() - began))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A unit test over UNIT_SECONDS of CPU, or WAITED_SECONDS of wall time (one that sleeps or waits
    on something), fails, saying where it belongs."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed or _tier(item) != "unit":
        return
    cpu = dict(item.user_properties).get("cpu_seconds", 0.0)
    if cpu > UNIT_SECONDS or call.duration > WAITED_SECONDS:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} took {cpu:.1f} s of CPU in {call.duration:.1f} s: a unit test answers "
                           f"in under {UNIT_SECONDS:g} s of CPU and {WAITED_SECONDS:g} s of wall time; make it "
                           "faster or move it to tests/integration")


def pytest_runtest_setup(item) -> None:
    """`@pytest.mark.needs("promtool")`: skipped where the program is missing, except under CI
    (CI=true, as .ci/run runs), which installs it: there a missing program fails the test."""
    for mark in item.iter_markers("needs"):
        program = mark.args[0]
        if shutil.which(program) is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{program} is missing: .ci/run installs it (scripts/apt-install)")
            pytest.skip(f"{program} is not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Bound for the whole session and never listening: a connection to it is refused, always. A port that
# was merely free a moment ago may be any other process's by the time a test connects (make test runs
# two tiers at once).
_CLOSED = socket.socket()
_CLOSED.bind(("127.0.0.1", 0))


def closed_port() -> int:
    return _CLOSED.getsockname()[1]


def get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a Prometheus text page, keyed by (name, sorted labels)."""
    samples = {}
    for family in text_string_to_metric_families(get(url).decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def total(samples: dict, name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and all((k, val) in ls for k, val in labels.items()))


@dataclass
class FakeServer:
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict:
        return json.loads(get(self.url + "/stats"))


@pytest.fixture
def fake_server():
    started: list[subprocess.Popen] = []

    def start(*args: str) -> FakeServer:
        process = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "sse_server.py"), "--port", "0", *args],
            stdout=subprocess.PIPE, text=True,
        )
        started.append(process)
        line = process.stdout.readline()
        assert line.startswith("listening on"), f"fake server did not start: {line!r}"
        return FakeServer(int(line.split()[-1]), process)

    yield start
    for process in started:
        process.terminate()
        process.wait(10)


def locust_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), *args]


def headless_run(url: str, results: Path, *options: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """A headless run of the chat locustfile against `url`, its results written to `results`."""
    return subprocess.run(locust_command("-H", url, "--headless", "--metrics-port", "0", "--results-json",
                                         str(results), *options), capture_output=True, text=True, timeout=timeout)


def finish(process: subprocess.Popen, timeout: float = 60, exit_within: float = 0) -> str:
    """End a Locust started by a test (after `exit_within` seconds for it to end by itself), killing
    it if it will not go, so no stray holds a port. With --processes, the workers go too: a master
    ended in the seconds after a stop, while it has let its workers go and they have not yet
    reported ready again, sends them no quit, and they hold its output open until they miss 60 s
    of heartbeats (Locust's behaviour)."""
    try:
        output, _ = process.communicate(timeout=exit_within)
        return output or ""
    except subprocess.TimeoutExpired:
        pass
    try:
        workers = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        workers = []
    process.terminate()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            output, _ = process.communicate(timeout=1)
            return output or ""
        except subprocess.TimeoutExpired:
            if process.poll() is not None:  # the master is gone; what holds its output is a worker
                for worker in workers:
                    with contextlib.suppress(psutil.Error):
                        worker.terminate()
    process.kill()
    for worker in workers:
        with contextlib.suppress(psutil.Error):
            worker.kill()
    output, _ = process.communicate()
    return output or ""


def wait_for(predicate, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


@contextlib.contextmanager
def embedded_engine(*extra: str):
    """The embedded engine with `extra` vLLM flags, for one module's tests and stopped after them:
    its start (half a minute) is not what they test."""
    from loadwatch.engine import process
    from loadwatch.engine.settings import EngineSettings
    from loadwatch.engine.setup import ensure_engine, ensure_model

    settings = EngineSettings()
    ensure_engine(settings)
    info = process.start(settings, ensure_model(settings), extra=list(extra))
    try:
        yield info
    finally:
        process.stop(settings)
