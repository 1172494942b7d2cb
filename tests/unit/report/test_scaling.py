"""How long after a fleet's change (--scale-at) its SLOs held again (issue 49)."""

from __future__ import annotations

import json

import pytest

from loadwatch.fleet.schedule import SCALING
from loadwatch.metrics.slo import parse_slo
from loadwatch.report.page import Mark
from loadwatch.report.scaling import fault_marks, held_again, scaling_figures

SLOS = [parse_slo("ttft_p99_ms=500")]


def requests(start: float, end: float, ttft_s: float, every: float = 0.5) -> list[dict]:
    """Requests finishing every `every` seconds over [start, end), each with this TTFT."""
    out, t = [], start
    while t < end:
        out.append({"start": t - 1.0, "elapsed_s": 1.0, "ttft_s": ttft_s, "failure": None, "stage": "load"})
        t += every
    return out


def test_the_slos_hold_again_at_the_first_window_from_which_every_later_one_holds():
    # Broken for 25 s after the change (a new replica loading), held from then on.
    records = requests(100, 125, 0.9) + requests(125, 170, 0.1)
    assert held_again(SLOS, records, 100, 170) == pytest.approx(30.0)  # the first whole window past 125
    assert held_again(SLOS, requests(100, 170, 0.1), 100, 170) == 0.0  # never broke
    assert held_again(SLOS, requests(100, 170, 0.9), 100, 170) is None  # never held again
    # A window that breaks again after holding: the count starts over.
    flapping = requests(100, 120, 0.1) + requests(120, 130, 0.9) + requests(130, 170, 0.1)
    assert held_again(SLOS, flapping, 100, 170) == pytest.approx(30.0)
    # Windows with too few requests are not judged either way.
    assert held_again(SLOS, requests(100, 170, 0.9, every=5), 100, 170) is None


def test_the_report_reads_the_runs_changes_and_judges_each_until_the_next(tmp_path):
    (tmp_path / SCALING).write_text(json.dumps({"started_at": 90, "events": [
        {"at_s": 0, "replicas": 1, "asked": 90, "ready_s": 0.1, "error": None},
        {"at_s": 10, "replicas": 2, "asked": 100, "ready_s": 0.2, "error": None},
        {"at_s": 70, "replicas": 3, "asked": 160, "ready_s": None, "error": "the embedded fleet has 2 replicas"}]}))
    records = requests(90, 125, 0.9) + requests(125, 170, 0.1)
    figures = scaling_figures(tmp_path, records, SLOS, 170)
    again = [e["slo_held_again_s"] for e in figures["events"]]
    assert again == [None, pytest.approx(30.0), None] and figures["judged"]
    assert scaling_figures(tmp_path / "elsewhere", records, [], 170) is None


def test_each_fault_is_marked_where_asked_where_undone_and_where_the_slos_held_again():
    faults = [{"action": "refuse", "replica": "b", "asked": 100.0, "ended": 120.0, "slo_held_again_s": 22.5},
              {"action": "kill", "replica": "b", "asked": 130.0, "ended": None, "slo_held_again_s": 0.0}]
    assert fault_marks(faults) == [Mark("refuse b", 100.0), Mark("b refuse ends", 120.0),
                                   Mark("SLOs held again", 122.5), Mark("kill b", 130.0)]
