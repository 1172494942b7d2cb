"""tune.json is written and read through its model (issue 60): a file tune wrote before the model,
without schema_version, still reads, by attribute, and writes back with the same keys."""

from __future__ import annotations

import json

from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.tune import SCHEMA_VERSION, Measured, Tune
from loadwatch.tune.output import markdown

KNEE = {"max_sustainable": 4.0, "unit": "users", "undecided": None, "cost_per_million_output_tokens": None}
AFTER = {**KNEE, "max_sustainable": 8.0}
# The layout of the tune guide's slots scenario (2026-11-27), its runs shortened, with a fleet's setting
# and a probe that moved: the keys written only where set.
OLDER = {
    "budget_s": 1200.0,
    "baseline": {"vllm_args": ["--max-num-seqs=2"], "env": {}, "capacity": KNEE, "limit": "batch_slots"},
    "steps": [{
        "step": 1, "limit": "batch_slots", "evidence": {"max_num_seqs": 2, "requests_waiting_peak": 4.0},
        "change": {"flag": "--max-num-seqs", "from": "2", "to": "8"},
        "reason": "more requests run at once", "verdict": "adopted", "refused": None, "settle": None,
        "gain": {"metric": "request_goodput", "change_pct": 572.7, "ci_low": 51.1, "ci_high": 2894.5},
        "slo_change": {"metric": "ttft_p90_ms", "change_pct": -98.0, "ci_low": -98.9, "ci_high": -96.6},
        "decided_by": "request_goodput",
        "capacity_after": AFTER, "limit_after": "batch_slots",
        "runs": {"current": [2521.9, 1144.5], "with_change": [31.0, 30.4], "current_goodput": [0.23, 1.75],
                 "with_change_goodput": [2.4, 2.5]},
        "probe_change": "TTFT -75%"}],
    "final": {"vllm_args": ["--max-num-seqs=8"], "env": {}, "fleet": {"--router-policy": "cache_aware"},
              "capacity": AFTER, "limit": "batch_slots", "command_line": "vllm serve MODEL --max-num-seqs=8"},
    "stopped": "--max-steps (1) reached",
    "cost": {"server_starts": 11, "seconds": 1150.2, "capacity_searches": [{"name": "baseline", "seconds": 310.0}]},
}


def test_a_tune_json_written_before_the_model_reads_as_version_1(tmp_path):
    path = tmp_path / "tune.json"
    path.write_text(json.dumps(OLDER, indent=2) + "\n")
    read = Tune.read(path)
    assert read.schema_version == SCHEMA_VERSION == 1
    step = read.steps[0]
    assert (step.change.before, step.change.after, step.gain.open) == ("2", "8", False)
    assert step.capacity_after is not None and step.capacity_after.max_sustainable == 8.0
    assert read.final is not None and read.final.fleet == {"--router-policy": "cache_aware"}
    assert read.cost is not None and read.cost.capacity_searches[0].seconds == 310.0
    # The same keys, the same values: DESIGN.md's contract, and what the benchmarks read.
    assert read.model_dump(mode="json") == {"schema_version": 1, **OLDER}
    assert "--max-num-seqs 2 -> 8" in markdown(read) and "The fleet: --router-policy cache_aware" in markdown(read)
    # A file from before decided_by was written reads too: nothing decided it, as far as it says.
    before = {**OLDER, "steps": [{k: v for k, v in OLDER["steps"][0].items() if k != "decided_by"}]}
    assert Tune.model_validate(before).steps[0].decided_by is None


def test_keys_written_only_where_set_stay_out_while_unset(tmp_path):
    """A tune still running has no cost yet; a configuration without a fleet's setting, no fleet; a
    step whose probe did not move, no probe_change."""
    doc = Tune.model_validate({k: v for k, v in OLDER.items() if k != "cost"})
    assert doc.baseline is not None and doc.steps[0].probe_change is not None
    doc.steps[0].probe_change = None
    written = json.loads(doc.json_text())
    assert "cost" not in written and "fleet" not in written["baseline"]
    assert "probe_change" not in written["steps"][0] and "fleet" in written["final"]
    path = tmp_path / "tune.json"
    path.write_text(doc.json_text())
    assert Tune.read(path) == doc


def test_a_capacity_as_tune_carries_it_is_capacity_jsons_knee_in_its_unit():
    result = Capacity(mode="users", unit="users", max_sustainable=4.0, limit="batch_slots",
                      cost_per_million_output_tokens=2.5)
    measured = Measured.of(result)
    assert measured is not None
    assert measured.model_dump() == {**KNEE, "cost_per_million_output_tokens": 2.5}
    assert Measured.of(None) is None
