"""The sidecar stops on its first SIGTERM, whenever in the sampler's cycle it comes (finding 17).

Once, a sidecar started with four faulty targets missed its SIGTERM and sampled on for 30 minutes;
a second one stopped it. Measured here before the fix, SIGTERM at random moments: 1 stop in 60 still
running 8 s later with both cores busy, then 0 in 250 (150 of them busy): far too rare for a test of
repeats alone to fail reliably. So the first test checks the cause itself,
which fails on the old code every time: a thread that does not block the stop signals may take one,
and the Python handler it leaves for the main thread can be missed. The second sends SIGTERM at
random moments of the start and of the sampler's cycle, many times. It keeps no core busy on
purpose: `make test` runs this tier beside the engine's, which is load enough, and a busy loop would
starve that tier's engine.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port, scrape, wait_for
from tests.integration.exporter.fault_target import FaultTarget

FAULTS = ("drip", "not_http", "cut", "silent")  # as in the check that missed its stop
STOPS = 40


@pytest.fixture(scope="module")
def faulty():
    targets = [FaultTarget(mode) for mode in FAULTS]
    yield [f"t{i}={t.url}" for i, t in enumerate(targets)]
    for t in targets:
        t.close()


def sidecar(targets: list[str], port: int) -> subprocess.Popen:
    args = [sys.executable, "-m", "loadwatch.cli", "exporter", "--port", str(port), "--interval", "0.2",
            "--timeout", "1"]
    for target in targets:
        args += ["--target", target]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def blocked(task: Path) -> int | None:
    """The thread's blocked signals; None where it ended since it was listed (it takes no signal)."""
    try:
        status = (task / "status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in status.splitlines():
        if line.startswith("SigBlk:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigBlk in {task}/status")


def test_no_thread_of_the_running_sidecar_can_take_a_stop_signal(faulty):
    port = free_port()
    process = sidecar(faulty, port)
    try:
        wait_for(lambda: scrape(f"http://127.0.0.1:{port}/metrics"), 30, "the sidecar serving")
        tasks = sorted(Path(f"/proc/{process.pid}/task").iterdir())
        assert len(tasks) >= 1 + len(FAULTS), "the main thread, the HTTP server and a sampler per target"
        stops = (1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))
        # The main thread takes them in sigwait, which unblocks them while it waits: every other blocks them.
        masks = {t.name: blocked(t) for t in tasks if t.name != str(process.pid)}
        open_to = [name for name, mask in masks.items() if mask is not None and mask & stops != stops]
        assert open_to == [], f"threads {open_to} of {len(tasks)} may take SIGTERM or SIGINT"
    finally:
        process.kill()
        process.wait()


def test_the_first_sigterm_stops_it_at_any_moment_of_the_cycle(faulty):
    rng = random.Random()
    missed, slowest = [], 0.0
    for _ in range(STOPS):
        process = sidecar(faulty, free_port())
        moment = rng.uniform(0.2, 3.0)  # from the imports through several cycles of 0.2 s
        time.sleep(moment)
        process.send_signal(signal.SIGTERM)
        began = time.monotonic()
        try:
            _, err = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            missed.append(round(moment, 2))
            process.kill()
            process.communicate()
            continue
        slowest = max(slowest, time.monotonic() - began)
        # -15: it came before Python installed any handler, and ended the process as it should.
        assert process.returncode in (0, 130, -signal.SIGTERM) and "Traceback" not in err, err[-2000:]
    assert missed == [], f"{len(missed)} of {STOPS} SIGTERMs missed, sent at {missed} s"
    print(f"{STOPS} stops, the slowest {slowest:.2f} s after its SIGTERM")
