"""Fault runs shared by the fault tests and benchmarks/faults.py: every fault of the test server
mixed into one headless run, counted by the server and by loadwatch."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import FakeServer, locust_command
from tests.sse_server import EXPECTED, FAULTS

# A prime each, so that every fault comes up (the first fault whose number divides the arrival's wins).
EVERY = dict(zip(FAULTS, (5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79), strict=True))
REQUESTS = 160
MODES = {
    "closed loop": ["-u", "4", "-r", "4"],
    "open loop": ["-u", "2", "-r", "2", "--request-rate", "40"],
    "--processes 2": ["-u", "4", "-r", "4", "--processes", "2"],
}
SERVER_ARGS = ["--ttft", "0.01", "--itl", "0.002", "--tokens", "6", "--stall", "5", "--retry-after", "0.5",
               *[f"--fault={f}={n}" for f, n in EVERY.items()]]


@dataclass
class FaultRun:
    mode: str
    server: dict  # the server's /stats
    results: dict  # loadwatch's results JSON
    output: str
    seconds: float

    def expected_failures(self) -> dict[str, int]:
        """Per reason, how many failures the server's own outcomes call for."""
        expected: dict[str, int] = {}
        for fault, n in self.server["outcomes"].items():
            reason = EXPECTED.get(fault)
            if reason is not None:
                expected[reason] = expected.get(reason, 0) + n
        return expected


def fault_run(server: FakeServer, mode: str, tmp: Path) -> FaultRun:
    results = tmp / f"results-{mode.replace(' ', '-')}.json"
    began = time.monotonic()
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", *MODES[mode], "--num-requests", str(REQUESTS),
                       "--request-timeout", "2.5", "--metrics-port", "0", "--results-json", str(results),
                       "--stop-timeout", "10"),
        capture_output=True, text=True, timeout=120)
    return FaultRun(mode, server.stats(), json.loads(results.read_text()), run.stdout + run.stderr,
                    time.monotonic() - began)
