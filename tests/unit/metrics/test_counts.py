import msgpack
import pytest

from loadwatch.catalogue import Client
from loadwatch.metrics import definitions as d
from loadwatch.metrics.counts import MetricCounts

LABELS = ("m", "chat")


def test_bucket_bounds_are_inclusive_as_le_means():
    counts = MetricCounts()
    for value in (0.001, 0.0011, 2560.0, 3000.0):
        counts.observe(d.TTFT.name, LABELS, value)
    hist = dict(next(counts.histograms_named(d.TTFT.name))[1].cumulative())
    assert hist["0.001"] == 1
    assert hist["0.005"] == 2
    assert hist["2560.0"] == 3
    assert hist["+Inf"] == 4


def test_master_total_is_the_exact_sum_of_worker_deltas():
    values = [0.0005, 0.02, 0.1, 0.1, 0.3, 7.0, 100.0, 5000.0]
    direct = MetricCounts()
    master = MetricCounts()
    workers = [MetricCounts(), MetricCounts()]
    for i, v in enumerate(values):
        direct.observe(d.TTFT.name, LABELS, v)
        direct.inc(Client.REQUESTS, LABELS)
        workers[i % 2].observe(d.TTFT.name, LABELS, v)
        workers[i % 2].inc(Client.REQUESTS, LABELS)
        if i % 3 == 0:  # reports interleave with observations
            for w in workers:
                master.merge(msgpack.unpackb(msgpack.packb(w.drain())))
    for w in workers:
        master.merge(msgpack.unpackb(msgpack.packb(w.drain())))
    (_, got), = master.histograms_named(d.TTFT.name)
    (_, want), = direct.histograms_named(d.TTFT.name)
    assert got.counts == want.counts
    assert got.total == pytest.approx(want.total)
    assert dict(master.counters_named(Client.REQUESTS)) == {LABELS: len(values)}


def test_drain_restarts_from_zero():
    counts = MetricCounts()
    counts.observe(d.E2E.name, LABELS, 1.0)
    counts.inc(Client.FAILURES, (*LABELS, "timeout"))
    first = counts.drain()
    assert len(first["h"]) == 1 and len(first["c"]) == 1
    assert counts.drain() == {"h": [], "c": []}
