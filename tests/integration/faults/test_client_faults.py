"""Whatever the server sends, every request ends once: a measured success or one failure reason.

One headless run per mode (closed loop, open loop, --processes 2) against the test server with
every fault mixed in; `--num-requests` makes the count exact, so the server's own tally of what
it received and did must equal loadwatch's results, reason by reason.
"""

from __future__ import annotations

import pytest

from tests.integration.faults.scenarios import MODES, REQUESTS, SERVER_ARGS, fault_run


@pytest.mark.parametrize("mode", list(MODES))
def test_every_request_is_counted_once_with_the_right_reason(fake_server, tmp_path, mode):
    run = fault_run(fake_server(*SERVER_ARGS), mode, tmp_path)
    assert run.server["arrivals"] == REQUESTS, run.output[-3000:]
    results = run.results
    assert results["completed"] + results["failed"] == REQUESTS, results["failures"]
    assert results["completed"] == run.server["outcomes"]["completed"]
    assert results["failures"] == run.expected_failures()
    assert results["streams_without_done"] == run.server["outcomes"].get("no_done", 0)
    assert "Traceback" not in run.output, run.output[-3000:]
    # Faults stall at most the 2.5 s request timeout or a 0.5 s Retry-After; nothing hangs the run.
    assert run.seconds < 60
