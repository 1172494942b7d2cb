import random
import statistics

import pytest

from loadwatch.workloads.arrivals import gap


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 4.0])
def test_gaps_have_mean_one_over_rate_and_cv_one_over_sqrt_burstiness(burstiness):
    rng = random.Random(1)
    gaps = [gap(rng, 50.0, burstiness) for _ in range(20000)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / 50, rel=0.03)
    assert statistics.pstdev(gaps) / mean == pytest.approx(burstiness ** -0.5, rel=0.05)
