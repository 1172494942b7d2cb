"""A run whose fleet changed its replica count (--scale-at): for each change, how long the SLOs took
to hold again, from the run's per-request records.

The SLOs are judged per window of WINDOW seconds over the requests that finished in it (a window
with fewer than MIN_REQUESTS is not judged). After a change, the SLOs hold again at the start of
the first judged window from which every judged window up to the next change holds; 0 where they
never broke. This is how an autoscaler's reaction is read off a load test: the time from the
change to a fleet that meets its objectives again.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from loadwatch.fleet.schedule import SCALING
from loadwatch.metrics.records import ratio_counts
from loadwatch.metrics.slo import SLO, held_since
from loadwatch.report.page import Mark

WINDOW = 10.0
MIN_REQUESTS = 5
FIELDS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "elapsed_s"}  # the SLO's metric -> the record's field


def _stat(slo: SLO, finished: list[dict]) -> float | None:
    if slo.is_ratio:
        counted, ended = ratio_counts(slo.metric, finished)
        return counted / ended if ended else None
    if slo.metric == "itl":
        values = [gap for r in finished if r["failure"] is None for gap in r.get("itl_s") or ()]
    else:
        values = [r[FIELDS[slo.metric]] for r in finished if r["failure"] is None and r.get(FIELDS[slo.metric])
                  is not None]
    if not values:
        return None
    ms = np.array(values) * 1000
    if slo.stat == "mean":
        return float(ms.mean())
    return float(np.percentile(ms, 50 if slo.stat == "median" else float(slo.stat[1:])))


def holds(slos: list[SLO], finished: list[dict]) -> bool | None:
    """Whether every SLO holds over these requests; None: too few to judge."""
    if len(finished) < MIN_REQUESTS:
        return None
    stats = [(slo, _stat(slo, finished)) for slo in slos]
    return all(value is None or value <= slo.limit for slo, value in stats)


def held_again(slos: list[SLO], records: list[dict], start: float, end: float) -> float | None:
    """Seconds from `start` (a change) to the window from which the SLOs held until `end`; None:
    they did not hold again before it."""
    done = [r for r in records if r["stage"] != "warmup" and start <= r["start"] + r["elapsed_s"] < end]
    edges = np.arange(start, end, WINDOW)
    since = held_since([(float(a), holds(slos, [r for r in done if a <= r["start"] + r["elapsed_s"] < a + WINDOW]))
                        for a in edges])
    return None if since is None else round(since - start, 1)


def fault_marks(faults: list[dict]) -> list[Mark]:
    """A run's faults (--fault-at) on its time charts, beside the replicas serving: each where it was
    asked, where it was undone (one that lasts), and where the SLOs held again after it."""
    marks = []
    for fault in faults:
        marks.append(Mark(f"{fault['action']} {fault['replica']}", fault["asked"]))
        if fault.get("ended"):
            marks.append(Mark(f"{fault['replica']} {fault['action']} ends", fault["ended"]))
        if fault.get("slo_held_again_s"):
            marks.append(Mark("SLOs held again", fault["asked"] + fault["slo_held_again_s"]))
    return marks


def scaling_figures(run_dir: Path, records: list[dict] | None, slos: list[SLO], end: float) -> dict | None:
    """The run's changes with the time each took to hold the SLOs again; None for a run that made none."""
    path = run_dir / SCALING
    if not path.is_file():
        return None
    noted = json.loads(path.read_text())
    events = noted["events"]
    out = []
    for i, event in enumerate(events):
        until = events[i + 1]["asked"] if i + 1 < len(events) else end
        again = held_again(slos, records, event["asked"], until) if records and slos and not event["error"] else None
        out.append({**event, "slo_held_again_s": again})
    return {"events": out, "window_s": WINDOW, "judged": bool(slos and records)}
