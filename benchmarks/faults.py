"""The fault table: every fault of tests/sse_server.py mixed into one headless run per mode, and
what the server counted against what loadwatch recorded.

    .venv/bin/python benchmarks/faults.py

Prints, per fault, how many the server sent and the reason loadwatch must record; then per mode
and reason, the server's count, loadwatch's, and the requests lost or counted twice.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import REPO, FakeServer  # noqa: E402
from tests.integration.faults.scenarios import MODES, SERVER_ARGS, FaultRun, fault_run  # noqa: E402
from tests.sse_server import EXPECTED, FAULTS  # noqa: E402


def start_server() -> tuple[FakeServer, subprocess.Popen]:
    process = subprocess.Popen([sys.executable, str(REPO / "tests" / "sse_server.py"), "--port", "0", *SERVER_ARGS],
                               stdout=subprocess.PIPE, text=True)
    return FakeServer(int(process.stdout.readline().split()[-1]), process), process


def main() -> int:
    runs: list[FaultRun] = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            server, process = start_server()
            try:
                runs.append(fault_run(server, mode, Path(tmp)))
            finally:
                process.terminate()
                process.wait(10)
    print(f"{'fault':<18}" + "".join(f"{r.mode + ' sent':>22}" for r in runs) + "   recorded as")
    for fault in FAULTS:
        print(f"{fault:<18}" + "".join(f"{r.server['outcomes'].get(fault, 0):>22}" for r in runs)
              + f"   {EXPECTED[fault] or 'success'}")
    print()
    print(f"{'mode':<15}{'reason':<18}{'server':>8}{'loadwatch':>11}{'lost':>6}{'double':>8}")
    for r in runs:
        expected = {"success": r.server["outcomes"].get("completed", 0), **r.expected_failures()}
        recorded = {"success": r.results["completed"], **r.results["failures"]}
        for reason in sorted(set(expected) | set(recorded)):
            want, got = expected.get(reason, 0), recorded.get(reason, 0)
            print(f"{r.mode:<15}{reason:<18}{want:>8}{got:>11}{max(0, want - got):>6}{max(0, got - want):>8}")
        total = r.results["completed"] + r.results["failed"]
        print(f"{r.mode:<15}{'all':<18}{r.server['arrivals']:>8}{total:>11}"
              f"{max(0, r.server['arrivals'] - total):>6}{max(0, total - r.server['arrivals']):>8}"
              f"   ({r.seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
