import random
import statistics

import pytest

from loadwatch.workloads.arrivals import gap, spend


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 4.0])
def test_gaps_have_mean_one_over_rate_and_cv_one_over_sqrt_burstiness(burstiness):
    rng = random.Random(1)
    gaps = [gap(rng, burstiness) / 50.0 for _ in range(20000)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / 50, rel=0.03)
    assert statistics.pstdev(gaps) / mean == pytest.approx(burstiness ** -0.5, rel=0.05)


def test_a_gap_within_the_horizon_is_waited_at_the_rate_of_the_moment():
    assert spend(0.5, rate=10.0, horizon=0.25) == (0.05, 0.0)


def test_a_rate_change_mid_gap_changes_the_rest_of_the_wait():
    wait, left = spend(3.0, rate=2.0, horizon=0.5)  # one unit spent in half a second
    assert (wait, left) == (0.5, 2.0)
    assert spend(left, rate=8.0, horizon=0.5) == (0.25, 0.0)  # the rest at four times the rate


def test_no_rate_waits_the_whole_horizon_and_keeps_the_gap():
    assert spend(1.5, rate=0.0, horizon=0.5) == (0.5, 1.5)
