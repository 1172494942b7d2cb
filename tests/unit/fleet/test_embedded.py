"""The embedded fleet's cores (fleet/embedded.core_sets): starting one is tests/e2e/test_fleet.py."""

from __future__ import annotations

from loadwatch.fleet.embedded import core_sets


def test_replicas_split_the_cores_evenly_where_each_gets_one():
    assert core_sets([0, 1, 2, 3], 2) == [[0, 1], [2, 3]]
    # A core left over stays unbound: replicas of unequal cores would not be compared like for like.
    assert core_sets([0, 1, 2, 3, 4], 2) == [[0, 1], [2, 3]]
    assert core_sets([4, 5, 6], 3) == [[4], [5], [6]]


def test_fewer_cores_than_replicas_are_shared_by_all():
    assert core_sets([0, 1], 3) == [[0, 1], [0, 1], [0, 1]]
