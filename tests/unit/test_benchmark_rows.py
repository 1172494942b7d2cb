"""benchmarks/fidelity.py's rule for a row that counts: the server kept its schedule (p99 lag within
KEPT_SCHEDULE_MS), judged on the clock the server's lag is read on."""

from __future__ import annotations

import pytest

from benchmarks.fidelity import KEPT_SCHEDULE_MS, server_late


def stats(p99_ms: float) -> dict:
    return {"lag_p99_ms": p99_ms, "longest_pass_ms": 23.4, "longest_pass_chunks": 672}


@pytest.mark.parametrize("p99_ms", [0.0, 1.0, KEPT_SCHEDULE_MS - 1e-9, KEPT_SCHEDULE_MS,
                                    KEPT_SCHEDULE_MS + 4.07e-10])  # uvloop's whole 2 ms, as measured once
def test_a_server_on_its_schedule_to_the_microsecond_counts(p99_ms):
    assert server_late(stats(p99_ms)) == ""


@pytest.mark.parametrize("p99_ms", [KEPT_SCHEDULE_MS + 0.001, 3.0, 48.0])
def test_a_late_server_names_its_longest_pass(p99_ms):
    assert server_late(stats(p99_ms)) == "its longest pass wrote 672 chunks in 23 ms"
