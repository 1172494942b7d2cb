from loadwatch.loadgen import quota
from loadwatch.loadgen.quota import MEASURED, WARMUP, Quota, Tickets


def test_tickets_give_warmup_first_then_exactly_the_measured_ones():
    pool = Tickets(requests=3, warmup_requests=2)
    assert pool.take(4) == [WARMUP, WARMUP, MEASURED, MEASURED]
    assert pool.take(4) == [MEASURED]
    assert pool.take(4) == []


def test_no_limit_never_runs_out():
    assert Tickets(requests=None, warmup_requests=0).take(3) == [MEASURED] * 3


def test_warmup_seconds_take_no_ticket(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(quota, "monotonic", lambda: clock[0])
    q = Quota(Tickets(requests=2, warmup_requests=0), warmup_seconds=5)
    assert [q.take(), q.take()] == [WARMUP, WARMUP]
    clock[0] = 106.0
    assert [q.take(), q.take(), q.take()] == [MEASURED, MEASURED, None]
