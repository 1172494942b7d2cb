"""`make test`'s integration and e2e tiers, after `make check`: first the tests that judge client
timing to the millisecond (marked `timing`), alone on the machine; then the rest of the integration
tier and the e2e tier side by side, in two pytest processes. Most of their time is spent waiting on
servers (Locust's runs, the engine's answers), so side by side they take about as long as the longer
of the two rather than their sum (about 40 and 36 min here, the two cores busy throughout). Each
keeps its own stack state and takes free ports, so their stacks never race for the default ones.
Every test's duration is kept in test-durations/."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
DURATIONS = Path("test-durations")


# Each process: the test folders it collects and the tests it runs of them.
PROCESSES = {
    "e2e": (["tests/e2e"], "not timing"),
    "integration": (["tests/integration"], "not timing"),
}


def pytest(paths: list[str], marks: str, durations: int, name: str) -> list[str]:
    return [*PYTEST, *paths, "-m", marks, f"--durations={durations}", f"--junitxml={DURATIONS / name}.xml"]


def side_by_side(tiers: list[str]) -> int:
    """The tiers at once, each line of their output prefixed with its tier; the worst exit code."""
    width = max(map(len, tiers))
    running = []
    for tier in tiers:
        env = {**os.environ, "LOADWATCH_STACK_FREE_PORTS": "true",
               "LOADWATCH_STACK_HOME": tempfile.mkdtemp(prefix=f"loadwatch-{tier}-")}
        process = subprocess.Popen(pytest(*PROCESSES[tier], 15, tier), env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=1)
        thread = threading.Thread(target=_echo, args=(process, tier.ljust(width)), daemon=True)
        thread.start()
        running.append((process, thread))
    codes = []
    for process, thread in running:
        try:
            codes.append(process.wait())
        except KeyboardInterrupt:  # Ctrl-C reached both (one process group): let them end their tests
            codes.append(process.wait())
        thread.join()
    return max(codes)


def _echo(process: subprocess.Popen, prefix: str) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        print(f"{prefix} | {line}", end="", flush=True)


def main() -> int:
    DURATIONS.mkdir(exist_ok=True)
    timing = subprocess.call(pytest(["tests/integration"], "timing", 5, "timing"))
    if timing:
        return timing
    return side_by_side(["e2e", "integration"])


if __name__ == "__main__":
    sys.exit(main())
