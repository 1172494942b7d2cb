"""summary.json is written and read through its model (issue 60): a file written before the model,
without schema_version, still reads, by attribute, and the experiment writes the same keys."""

from __future__ import annotations

import json
from pathlib import Path

from loadwatch.experiment import summary
from loadwatch.experiment.cells import Cell
from loadwatch.experiment.outcome import Outcome
from loadwatch.experiment.spec import Experiment
from loadwatch.metrics.experiment import SCHEMA_VERSION, ExperimentSummary

ENGINE = {"prefix_cache_hit_ratio": 0.5, "kv_cache_usage_peak": 0.3, "preemptions": 0.0, "requests_waiting_peak": 2.0}
FIGURES = {"request_throughput": 1.5, "output_throughput": 90.0, "mean_ttft_ms": 120.0, "median_ttft_ms": 110.0,
           "mean_tpot_ms": 20.0, "mean_e2el_ms": 1400.0}
# The layout the experiment wrote before the model: a group whose engine went unread says why (and only
# then), and one whose runs could not be read together says that.
OLDER = {
    "name": "prefix-caching", "baseline": "off", "repeats": 2,
    "groups": [
        {"arm": "off", "workload": "shared", "level": 4.0, "unit": "users", "folder": "off/shared",
         "runs": ["off/shared/r1/results.json", "off/shared/r2/results.json"], "failed_cells": 0, "short_cells": 0,
         "figures": FIGURES, "engine": ENGINE},
        {"arm": "on", "workload": "shared", "level": 4.0, "unit": "users", "folder": "on/shared", "runs": [],
         "failed_cells": 1, "short_cells": 1, "engine_missing": "no sidecar", "problem": "no runs to read",
         "figures": {key: None for key in FIGURES},
         "engine": {key: None for key in ENGINE}}],
    "rows": [{"arm": "on", "base": "off", "workload": "shared", "level": 4.0, "unit": "users",
              "metric": "median_ttft_ms", "base_value": 110.0, "value": 40.0, "change_pct": -63.6, "ci_low": -70.1,
              "ci_high": -55.0, "verdict": "better", "method": "runs"}],
    "capacity": [],
    "notes": ["on/shared/r2: too few requests; left out of the figures"],
    "pareto": None,
    "cells": [{"folder": "off/shared/r1", "arm": "off", "workload": "shared", "level": 4.0, "unit": "users",
               "repeat": 1, "results": "off/shared/r1/results.json", "problem": None, "too_few": None}],
}


def test_a_summary_json_written_before_the_model_reads_as_version_1(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(OLDER, indent=2) + "\n")
    read = ExperimentSummary.read(path)
    assert read.schema_version == SCHEMA_VERSION == 1
    off, on = read.groups
    assert off.engine.prefix_cache_hit_ratio == 0.5 and off.figures["median_ttft_ms"] == 110.0
    assert (on.engine_missing, on.problem, on.failed_cells) == ("no sidecar", "no runs to read", 1)
    assert read.rows[0].verdict == "better" and read.cells[0].repeat == 1
    # The same keys, the same values; a group without a problem still has no `problem` key.
    assert read.model_dump(mode="json") == {"schema_version": 1, **OLDER}


def test_the_experiment_writes_its_summary_through_the_model(tmp_path):
    experiment = Experiment.model_validate({"name": "x", "repeats": 1, "arms": {"off": {}, "on": {}},
                                            "workloads": {"shared": {}}})
    outcomes = [Outcome(Cell(arm, "shared", 4.0, "users", 1, False), tmp_path / arm / "shared" / "r1",
                        problem="the server did not start") for arm in ("off", "on")]
    said: list[str] = []
    summary.write(tmp_path, experiment, outcomes, said.append)
    written = json.loads((tmp_path / "summary.json").read_text())
    read = ExperimentSummary.read(tmp_path / "summary.json")
    assert [g.failed_cells for g in read.groups] == [1, 1] and read.rows == [] and read.baseline == "off"
    assert set(written) == {"schema_version", *OLDER}
    assert set(written["groups"][0]) == set(OLDER["groups"][0])  # no engine_missing, no problem: none was had
    assert set(written["cells"][0]) == set(OLDER["cells"][0])
    assert read.cells[0].problem == "the server did not start" and Path(read.cells[0].folder) == Path("off/shared/r1")
