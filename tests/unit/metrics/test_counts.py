import msgpack
import pytest

from loadwatch.catalogue import Client
from loadwatch.metrics import definitions as d
from loadwatch.metrics.counts import EXEMPLAR_INTERVAL, MetricCounts

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


VLLM_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                    480.0, 960.0, 1920.0, 7680.0)


def test_e2e_keeps_vllms_buckets_and_resolves_an_embeddings_p99():
    """Requests of 10-34 ms (embeddings on the embedded engine): a p99 interpolated as Prometheus does
    stays within the bucket that holds it, not inside [0, 0.3 s]."""
    assert set(VLLM_E2E_BUCKETS) <= set(d.E2E.buckets)  # client and engine histograms still line up
    counts = MetricCounts()
    for i in range(100):
        counts.observe(d.E2E.name, LABELS, 0.010 + 0.024 * i / 99)
    cumulative = next(counts.histograms_named(d.E2E.name))[1].cumulative()
    rank, lower = 0.99 * 100, 0.0
    below = 0
    for bound, n in cumulative:
        if n >= rank:
            p99 = lower + (float(bound) - lower) * (rank - below) / (n - below)
            break
        lower, below = float(bound), n
    assert 0.02 <= p99 <= 0.04, p99


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


def _exemplars(counts: MetricCounts, name: str) -> dict[int, tuple]:
    (_, hist), = counts.histograms_named(name)
    return {i: tuple(e) for i, e in enumerate(hist.exemplars or ()) if e is not None}


def test_a_bucket_keeps_its_slowest_request_until_the_interval_passes():
    counts = MetricCounts()
    counts.observe(d.TTFT.name, LABELS, 0.30, "a", at=100.0)
    counts.observe(d.TTFT.name, LABELS, 0.45, "b", at=101.0)  # slower, same bucket (0.25, 0.5]
    counts.observe(d.TTFT.name, LABELS, 0.26, "c", at=102.0)  # faster, within the interval: b stands
    assert list(_exemplars(counts, d.TTFT.name).values()) == [("b", 0.45, 101.0)]
    counts.observe(d.TTFT.name, LABELS, 0.27, "d", at=101.0 + EXEMPLAR_INTERVAL + 1)  # b is stale now
    assert list(_exemplars(counts, d.TTFT.name).values()) == [("d", 0.27, 101.0 + EXEMPLAR_INTERVAL + 1)]
    counts.observe(d.TTFT.name, LABELS, 3.0, "e", at=200.0)  # another bucket, its own exemplar
    assert sorted(e[0] for e in _exemplars(counts, d.TTFT.name).values()) == ["d", "e"]


def test_workers_ship_at_most_one_exemplar_a_bucket_and_the_master_keeps_the_slowest():
    master = MetricCounts()
    workers = [MetricCounts(), MetricCounts()]
    for i in range(100):
        workers[i % 2].observe(d.E2E.name, LABELS, 0.31 + i / 1000, f"r{i}", at=50.0)
    deltas = [msgpack.unpackb(msgpack.packb(w.drain())) for w in workers]
    assert all(len(delta["h"][0][4]) == 1 for delta in deltas)  # a hundred requests, one bucket, one exemplar
    for delta in deltas:
        master.merge(delta)
    assert list(_exemplars(master, d.E2E.name).values()) == [("r99", pytest.approx(0.409), 50.0)]


def test_observations_without_a_request_id_carry_no_exemplar():
    counts = MetricCounts()
    counts.observe(d.ITL.name, LABELS, 0.02)
    assert _exemplars(counts, d.ITL.name) == {}
    assert counts.drain()["h"][0][4] == []


def test_many_observations_at_once_count_as_one_by_one():
    gaps = [0.0, 0.0005, 0.02, 0.02, 0.1, 3.0, 1e9]
    one, many = MetricCounts(), MetricCounts()
    for gap in gaps:
        one.observe(d.ITL.name, LABELS, gap)
    many.observe_many(d.ITL.name, LABELS, gaps)
    assert one.drain() == many.drain()
