from loadwatch.loadgen.sending import quota
from loadwatch.loadgen.sending.quota import MEASURED, WARMUP, Quota, Tickets


def test_tickets_give_warmup_first_then_exactly_the_measured_ones():
    pool = Tickets(requests=3, warmup_requests=2)
    assert pool.take(4) == [(WARMUP, None), (WARMUP, None), (MEASURED, 0), (MEASURED, 1)]
    assert pool.take(4) == [(MEASURED, 2)]
    assert pool.take(4) == []


def test_no_limit_never_runs_out():
    assert Tickets(requests=None, warmup_requests=0).take(3) == [(MEASURED, 0), (MEASURED, 1), (MEASURED, 2)]


def test_warmup_seconds_take_no_ticket(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(quota, "monotonic", lambda: clock[0])
    q = Quota(Tickets(requests=2, warmup_requests=0), warmup_seconds=5)
    assert [q.take(), q.take()] == [WARMUP, WARMUP]
    clock[0] = 106.0
    assert [q.take(), q.take(), q.take()] == [MEASURED, MEASURED, None]


def test_a_ticket_granted_after_the_run_began_to_stop_sends_nothing():
    """A worker waits for the master's grant; the run's end (its last report gone) may come meanwhile."""
    class SlowGrant:
        def take(self):
            q.closed = True  # the master's flush arrives while this worker waits
            return [(MEASURED, 7)]

    q = Quota(SlowGrant(), warmup_seconds=0)  # type: ignore[arg-type]
    assert q.take() is None
