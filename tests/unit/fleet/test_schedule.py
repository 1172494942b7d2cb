"""`--scale-at TIME=N` (fleet/schedule.py): the plan as given, and each change noted in scaling.json
whether the fleet took it or not. The report's reading of that file: tests/unit/report/test_scaling.py."""

from __future__ import annotations

import json

import pytest

from loadwatch.fleet.scale import ScaleError, scale_schedule
from loadwatch.fleet.schedule import SCALING, parse_plan


@pytest.mark.parametrize("item", ["60s", "60s=0", "soon=2", "-5s=2"])
def test_a_plan_item_that_is_not_time_and_count_is_refused_by_name(item):
    with pytest.raises(ValueError, match=f"--scale-at '{item}' is not TIME=N"):
        parse_plan([item])
    assert parse_plan(["2m=1", "0s=2", "30=3"]) == [(0.0, 2), (30.0, 3), (120.0, 1)]


class Fleet:
    """A Scaler's scale_to: takes up to two replicas."""

    def __init__(self):
        self.asked: list[int] = []

    def scale_to(self, count: int, say) -> None:
        self.asked.append(count)
        if count > 2:
            raise ScaleError(f"the embedded fleet has 2 replicas: start it with --replicas {count}")


def test_changes_due_at_the_start_are_made_at_once_and_a_refused_one_is_noted_and_said(tmp_path):
    fleet, said = Fleet(), []
    schedule = scale_schedule(fleet, [(0.0, 2), (0.0, 3), (3600.0, 1)], tmp_path, said.append)  # type: ignore[arg-type]
    schedule.begin()
    assert fleet.asked == [2, 3]  # before the load's first request
    schedule.end()  # the load ended before the change due in an hour
    written = json.loads((tmp_path / SCALING).read_text())
    assert written["started_at"] == schedule.started_at
    assert [(e["replicas"], e["ready_s"] is not None, e["error"]) for e in written["events"]] == \
        [(2, True, None), (3, False, "the embedded fleet has 2 replicas: start it with --replicas 3")]
    assert said == ["warning: --scale-at 0s=3: the embedded fleet has 2 replicas: start it with --replicas 3"]


def test_a_later_change_is_made_when_due(tmp_path):
    fleet = Fleet()
    schedule = scale_schedule(fleet, [(0.05, 1)], tmp_path, print)  # type: ignore[arg-type]
    schedule.begin()
    assert fleet.asked == []
    schedule._thread.join(timeout=10)  # the thread ends after the plan's last change
    schedule.end()
    assert fleet.asked == [1] and json.loads((tmp_path / SCALING).read_text())["events"][0]["at_s"] == 0.05
