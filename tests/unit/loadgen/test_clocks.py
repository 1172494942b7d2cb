"""A worker's clock against the master's, from pings (issue 40)."""

from __future__ import annotations

import logging

from loadwatch.loadgen.clocks import Clocks


def test_the_reply_with_the_least_round_trip_is_kept_and_corrects_the_records():
    clocks = Clocks()
    clocks.pong("w_1", t0=100.0, tw=102.3, t1=100.2)  # +2.2 s, give or take 0.1 s
    clocks.pong("w_1", t0=105.0, tw=107.0105, t1=105.001)  # +2.01 s, give or take 0.5 ms: kept
    clocks.pong("w_1", t0=110.0, tw=112.5, t1=110.4)  # a slow one: ignored
    clocks.pong("w_1", t0=111.0, tw=0.0, t1=110.0)  # a reply from before its ping: ignored
    assert clocks.as_results() == {"w_1": {"offset_s": 2.01, "uncertainty_s": 0.0005}}
    records = [{"start": 1000.0}, {"start": 1001.5}]
    clocks.correct("w_1", records)
    clocks.correct("unknown_2", other := [{"start": 7.0}])
    assert records == [{"start": 997.99}, {"start": 999.49}] and other == [{"start": 7.0}]


def test_an_offset_known_worse_than_100_ms_is_warned_about(caplog):
    clocks = Clocks()
    clocks.pong("far_1", t0=0.0, tw=5.0, t1=0.5)
    clocks.pong("near_2", t0=0.0, tw=0.0, t1=0.01)
    with caplog.at_level(logging.WARNING):
        clocks.warn_uncertain()
    assert "far_1's clock is +4.750 s from the master's, give or take 0.250 s" in caplog.text
    assert "near_2" not in caplog.text


def test_a_moment_a_worker_acts_on_is_sent_on_its_own_clock():
    clocks = Clocks()
    clocks.pong("ahead_1", t0=10.0, tw=12.0, t1=10.0)
    assert clocks.on_workers_clock("ahead_1", 500.0) == 502.0
    assert clocks.on_workers_clock("unheard_2", 500.0) == 500.0
