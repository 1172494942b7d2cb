"""Tune's admission-cap trial past the knee (issue 61): the cap the capacity search sized, and the
trade it measures, the admitted requests' SLO metric against the share refused, each with its
interval, shown as a table and adopted by nobody but the user."""

from __future__ import annotations

import json
import random

from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.slo import parse_slo
from loadwatch.metrics.tune import FlagChange, Overload, Tune
from loadwatch.tune.config import Config
from loadwatch.tune.output import markdown
from loadwatch.tune.overload import cap_changes, side, ttft_slo, verdict

SLO = parse_slo("ttft_p99_ms=500")


def capacity(overload: dict | None) -> Capacity:
    return Capacity(mode="users", unit="users", max_sustainable=8.0, overload=overload)


def test_the_caps_are_those_the_search_sized_and_only_where_none_is_set():
    sized = capacity({"max_num_queued_tokens": 1200, "max_num_queued_reqs": 4, "explanation": "..."})
    changes = [(c.flag, c.before, c.after) for c in cap_changes(sized, Config(("--max-num-seqs", "8")))]
    assert changes == [("--max-num-queued-tokens", None, "1200"), ("--max-num-queued-reqs", None, "4")]
    assert [c.flag for c in cap_changes(sized, Config(("--max-num-queued-tokens", "900")))] == [
        "--max-num-queued-reqs"]
    assert cap_changes(capacity(None), Config()) == []
    assert cap_changes(capacity({"max_num_queued_tokens": None, "max_num_queued_reqs": None}), Config()) == []
    assert ttft_slo([parse_slo("failure_ratio=0.01"), SLO]) == SLO


def run(folder, name, ttfts, completed, rejected, rng):
    """A round's run as measure() leaves it: results.json and its records beside it."""
    where = folder / name
    where.mkdir(parents=True)
    (where / "results.json").write_text(json.dumps({"completed": completed, "failed": 0, "rejected": rejected,
                                                    "request_goodput": completed / 60}))
    start = 0.0
    with open(where / "results.requests.jsonl", "w") as out:
        for ttft in ttfts:
            start += rng.random()
            out.write(json.dumps({"stage": "trial", "failure": None, "ttft_s": ttft, "start": start}) + "\n")
        for _ in range(rejected):
            out.write(json.dumps({"stage": "trial", "failure": "rejected", "ttft_s": None, "start": start}) + "\n")


def test_each_side_pools_its_rounds_admitted_latency_and_refusals_with_intervals(tmp_path):
    rng = random.Random(1)
    for r in ("r1", "r2"):
        run(tmp_path / "current", r, [rng.uniform(1.5, 3.0) for _ in range(200)], 200, 0, rng)
        run(tmp_path / "queued-tokens-cap", r, [rng.uniform(0.05, 0.3) for _ in range(150)], 150, 50, rng)
    current, capped = side("current", tmp_path / "current", SLO), side("queued-tokens-cap",
                                                                       tmp_path / "queued-tokens-cap", SLO)
    assert (current.rounds, current.completed, current.rejected) == (2, 400, 0)
    assert current.within_slo is False and current.measured > 1400 and current.rejected_ratio == 0.0
    assert capped.within_slo is True and capped.measured < 310 and capped.ci_high < 500
    assert capped.rejected_ratio == 0.25 and capped.rejected_ci_low < 0.25 < capped.rejected_ci_high
    doc = Overload(level=16.0, unit="users", changes=[FlagChange(flag="--max-num-queued-tokens", before=None,
                                                                 after="1200")],
                   metric="ttft_p99_ms", limit=500.0, sides=[current, capped])
    doc.verdict = verdict(doc)
    assert doc.verdict.startswith("with queued-tokens-cap: ttft_p99_ms ")
    assert "within its 500 ms, refusing 25.0% [" in doc.verdict
    assert "not within its 500 ms, refusing 0.0%" in doc.verdict
    text = markdown(Tune(budget_s=600, overload=doc, baseline=None))
    assert text.startswith("## Tuning")  # no baseline: nothing measured, nothing past the knee to show
    table = markdown(Tune.model_validate({"budget_s": 600, "baseline": {
        "vllm_args": [], "capacity": {"max_sustainable": 8, "unit": "users"}, "limit": "batch_slots"},
        "overload": doc.model_dump(mode="json")}))
    assert "### Past the knee: admission control" in table and "| queued-tokens-cap | 2 |" in table
    assert "Not adopted" in table
