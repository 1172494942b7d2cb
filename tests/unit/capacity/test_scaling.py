"""A fleet's capacity against replicas and the autoscaling rule read at its knee (issue 49)."""

from __future__ import annotations

import yaml

from loadwatch.capacity import autoscale
from loadwatch.capacity.command import replicas_for, scaling_of
from loadwatch.capacity.levels import Level
from loadwatch.catalogue import Engine
from loadwatch.metrics.capacity import Capacity

ONE = Capacity(mode="rate", unit="req/s", max_sustainable=4.0, limit="batch_slots")  # the search on one replica


def test_the_scaling_efficiency_is_the_fleets_capacity_over_n_times_one_replicas():
    scaling = scaling_of(ONE, 6.0, 2)
    assert scaling is not None and scaling.capacity == {"1": 4.0, "2": 6.0}
    assert scaling.efficiency == 0.75 and scaling.alone == 4.0 and scaling.fleet == 6.0
    assert scaling_of(None, 6.0, 2) is None
    unheld = scaling_of(ONE.model_copy(update={"max_sustainable": None}), 6.0, 2)
    assert unheld is not None and unheld.efficiency is None


def test_replicas_needed_follow_the_measured_scaling_not_a_proportion():
    # 2 replicas sustain 6, one 4: each replica past the first adds 2; 11 needs 1 + ceil(7 / 2) = 5.
    assert replicas_for(11.0, 6.0, 2, scaling_of(ONE, 6.0, 2)) == 5
    # Unmeasured, in proportion: 2 x 11 / 6.
    assert replicas_for(11.0, 6.0, 2, None) == 4
    # A fleet no better than one replica: the proportion, not a division by nothing.
    assert replicas_for(11.0, 4.0, 2, scaling_of(ONE, 4.0, 2)) == 6


def test_the_signal_follows_the_limit_a_replicas_own_included():
    assert autoscale.signal_for("kv_cache", {}) is autoscale.KV_SIGNAL
    assert autoscale.signal_for("replicas", {"replica_limit": "kv_cache"}) is autoscale.KV_SIGNAL
    assert autoscale.signal_for("replicas", {"replica_limit": "batch_slots"}) is autoscale.IN_ENGINE_SIGNAL
    assert autoscale.signal_for("compute", {}) is autoscale.IN_ENGINE_SIGNAL


class FakeAPI:
    """Answers a window query with the value of the level it ends at."""

    def __init__(self, by_end: dict[float, float]):
        self.by_end = by_end
        self.queries: list[str] = []

    def scalar(self, expr: str, at: float) -> float | None:
        self.queries.append(expr)
        return self.by_end.get(at)


def level(value: float, start: float, end: float) -> Level:
    return Level(1, value, "req/s", f"level-{value:g}", start=start, end=end)


def test_the_threshold_is_the_held_levels_mean_per_replica_and_the_broken_one_is_compared():
    api = FakeAPI({100.0: 12.0, 200.0: 40.0})  # the fleet's sums: 6 and 20 per replica
    found = autoscale.rule(api, "replicas", {"replica_limit": "batch_slots"}, level(6, 70, 100), level(8, 170, 200),
                           ["a", "b"], 2)
    assert found is not None
    assert found.threshold == 6.0 and found.at_broken_level == 20.0 and found.separates
    assert found.metric == autoscale.IN_ENGINE and found.per_replica
    assert '{target=~"a|b"}[30s]' in api.queries[0]
    assert found.query == (f'sum({Engine.REQUESTS_RUNNING}{{namespace="loadwatch"}}) + '
                              f'sum({Engine.REQUESTS_WAITING}{{namespace="loadwatch"}})')
    weak = autoscale.rule(FakeAPI({100.0: 12.0, 200.0: 13.0}), "compute", {}, level(6, 70, 100), level(8, 170, 200),
                          ["a", "b"], 2)
    assert weak is not None and not weak.separates
    assert autoscale.rule(api, "compute", {}, None, level(8, 170, 200), [], 1) is None  # nothing held


def test_the_rule_is_written_as_keda_hpa_and_the_adapters_rule(tmp_path):
    found = autoscale.rule(FakeAPI({100.0: 0.8}), "kv_cache", {}, level(6, 70, 100), None, [], 1)
    assert found is not None and found.threshold == 0.8 and not found.per_replica
    files = autoscale.write(tmp_path, found, 4)
    docs = {path.name: yaml.safe_load(path.read_text()) for path in files}
    trigger = docs["keda-scaledobject.yaml"]["spec"]["triggers"][0]
    assert trigger["metricType"] == "Value" and trigger["metadata"]["threshold"] == "0.8"
    assert docs["keda-scaledobject.yaml"]["spec"]["maxReplicaCount"] == 4
    target = docs["hpa.yaml"]["spec"]["metrics"][0]["pods"]
    assert target == {"metric": {"name": Engine.KV_CACHE_USAGE}, "target": {"type": "AverageValue",
                                                                            "averageValue": "800m"}}
    assert docs["prometheus-adapter-rules.yaml"]["rules"][0]["name"] == {"as": Engine.KV_CACHE_USAGE}
    assert (tmp_path / "autoscaling" / "hpa.yaml").read_text().startswith("# From loadwatch capacity")
