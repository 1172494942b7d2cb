import random

import numpy as np
import pytest

from loadwatch.metrics.sketch import ACCURACY, Sketch

QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0)


def sketch_of(values) -> Sketch:
    sketch = Sketch()
    sketch.extend(values)
    return sketch


@pytest.mark.parametrize("values", [
    np.random.default_rng(1).lognormal(np.log(0.2), 0.8, 50_000),  # TTFT-like, long tail
    np.random.default_rng(2).normal(0.02, 0.002, 20_000).clip(1e-4),  # ITL-like, narrow
    np.concatenate([np.full(500, 0.1), np.full(5, 30.0)]),  # two clusters: interpolation across a gap
    np.array([0.0, 0.0, 0.005, 0.010]),  # zeros (chunks read together) and tiny n
], ids=["lognormal", "narrow", "clusters", "zeros"])
def test_quantiles_are_numpys_within_the_stated_accuracy_and_moments_exact(values):
    sketch = sketch_of(values)
    for q in QUANTILES:
        assert sketch.quantile(q) == pytest.approx(np.percentile(values, 100 * q), rel=ACCURACY, abs=1e-12), q
    assert sketch.count == len(values)
    assert sketch.average() == pytest.approx(values.mean(), rel=1e-9)
    assert sketch.std() == pytest.approx(values.std(), rel=1e-6, abs=1e-12)


def test_merged_sketches_equal_one_that_saw_everything_and_survive_the_wire():
    values = np.random.default_rng(3).lognormal(-2, 1, 30_000)
    parts = [sketch_of(chunk) for chunk in np.array_split(values, 7)]
    merged = Sketch()
    for part in parts:
        merged.merge(Sketch.from_wire(part.to_wire()))
    whole = sketch_of(values)
    assert merged.bins == whole.bins and merged.count == whole.count
    assert merged.std() == pytest.approx(whole.std(), rel=1e-9)
    for q in QUANTILES:
        assert merged.quantile(q) == pytest.approx(whole.quantile(q), rel=1e-12)


def test_memory_is_bounded_by_the_range_not_the_count():
    rng = np.random.default_rng(4)
    sketch = sketch_of(rng.uniform(0.001, 100.0, 200_000))  # 1 ms to 100 s: five decades
    assert len(sketch.bins) <= np.log(100.0 / 0.001) / np.log((1 + ACCURACY) / (1 - ACCURACY)) + 2
    assert len(sketch.bins) < 1200


def test_an_empty_sketch_has_no_statistics():
    empty = Sketch()
    assert empty.quantile(0.5) is None and empty.average() is None and empty.std() is None


def test_a_window_is_what_was_added_since_a_copy():
    rng = random.Random(4)
    sketch = Sketch()
    sketch.extend(rng.lognormvariate(-2, 0.3) for _ in range(5000))
    before = sketch.copy()
    recent = [rng.lognormvariate(0, 0.1) for _ in range(500)]  # ten times slower: the window sees them only
    sketch.extend(recent)
    window = sketch.since(before)
    assert window.count == 500
    assert window.quantile(0.5) == pytest.approx(float(np.percentile(recent, 50)), rel=0.01)
    assert window.average() == pytest.approx(float(np.mean(recent)), rel=1e-6)
    assert Sketch().since(before).count == 0  # emptied in between (a new run): nothing negative


def test_extend_is_add_one_by_one_to_the_last_bit():
    import random

    from loadwatch.metrics.sketch import Sketch

    values = [random.Random(7).lognormvariate(-4, 1) for _ in range(2000)] + [0.0, 1e-12]
    one, many = Sketch(), Sketch()
    for value in values:
        one.add(value)
    many.extend(values)
    assert (one.bins, one.zeros, one.count, one.mean, one.m2, one.low, one.high) == \
        (many.bins, many.zeros, many.count, many.mean, many.m2, many.low, many.high)
