import numpy as np

from loadwatch.metrics import bootstrap


def test_the_verdict_follows_the_direction_that_is_better():
    assert bootstrap.verdict(-30, -10, higher_is_better=False) == "better"
    assert bootstrap.verdict(-30, -10, higher_is_better=True) == "worse"
    assert bootstrap.verdict(-3, 2, higher_is_better=True) == "same"


def test_an_a_a_comparison_is_rarely_called_a_change():
    """Two samples of one distribution: a 95 % interval excludes 0 about 1 time in 20."""
    rng = np.random.default_rng(7)
    called = 0
    for _ in range(60):
        a, b = rng.lognormal(4, 0.5, 120), rng.lognormal(4, 0.5, 120)
        ra, rb = (bootstrap.group_resamples([x], "median", rng, 500) for x in (a, b))
        called += bootstrap.change(float(np.median(a)), float(np.median(b)), ra, rb, False).verdict != "same"
    assert called <= 9  # 5 % of 60 is 3; binomial tail and the percentile method's slight narrowness


def test_the_interval_holds_the_point_change_and_a_large_effect_is_seen():
    rng = np.random.default_rng(3)
    a, b = rng.normal(1400, 100, 80), rng.normal(60, 10, 80)
    result = bootstrap.change(float(np.mean(a)), float(np.mean(b)),
                              bootstrap.group_resamples([a], "mean", rng), bootstrap.group_resamples([b], "mean", rng),
                              higher_is_better=False)
    assert result.verdict == "better" and result.ci_low <= result.change_pct <= result.ci_high < -90


def test_a_run_larger_than_the_cap_is_subsampled_not_refused():
    rng = np.random.default_rng(0)
    values = rng.normal(100, 10, bootstrap.MAX_REQUESTS * 2)
    resampled = bootstrap.request_resamples(values, "p99", rng, 50)
    assert resampled.shape == (50,) and 115 < resampled.mean() < 130


def test_no_baseline_gives_no_change():
    assert bootstrap.change(0.0, 1.0, None, None, True).change_pct is None
    assert bootstrap.change(1.0, 2.0, None, None, True) == bootstrap.Change(100.0)


def drifting_run(rng: np.random.Generator, n: int = 150) -> np.ndarray:
    """TTFTs of a closed loop whose state wanders: each request much like the one before (AR(1))."""
    noise = rng.normal(0, 10, n)
    values = np.empty(n)
    values[0] = 150 + rng.normal(0, 10 / np.sqrt(1 - 0.8**2))
    for i in range(1, n):
        values[i] = 150 + 0.8 * (values[i - 1] - 150) + noise[i]
    return values


def test_requests_that_depend_on_each_other_do_not_make_a_run_look_different_from_its_twin():
    """Runs of one configuration whose requests wander together: an interval over single requests
    calls over half the pairs different (34 of 60 here); blocks of consecutive requests, 7."""
    rng = np.random.default_rng(11)
    called = 0
    for _ in range(60):
        a, b = drifting_run(rng), drifting_run(rng)
        ra, rb = (bootstrap.group_resamples([x], "mean", rng, 400) for x in (a, b))
        called += bootstrap.change(float(a.mean()), float(b.mean()), ra, rb, False).verdict != "same"
    assert called <= 12


def test_two_repeats_spread_the_group_as_much_as_their_unbiased_variance_says():
    """Runs at 100 and 120 ms (each one steady): the mean of two has a standard error of
    s/sqrt(2) = 10 ms; a plain bootstrap of two values gives 7.1, the correction 10."""
    rng = np.random.default_rng(5)
    runs = [np.full(200, 100.0) + rng.normal(0, 0.1, 200), np.full(200, 120.0) + rng.normal(0, 0.1, 200)]
    spread = bootstrap.group_resamples(runs, "mean", rng, 4000).std()
    assert 9.0 < spread < 11.0
