"""How a step is judged: the SLO a trial is judged on, the load it runs at, and its verdicts."""

from loadwatch.tune.command import metric_of, step_rows, where_it_broke
from loadwatch.tune.config import Change, Config
from loadwatch.tune.levers import LEVERS
from loadwatch.tune.trial import Arm, gain

LEVEL = {"name": "level-03", "level": 3.0, "unit": "users",
         "slo": [{"name": "e2el_p90_ms", "passed": True}, {"name": "ttft_p99_ms", "passed": False}]}


def test_a_trial_is_judged_on_the_slo_that_broke_at_the_level_the_diagnosis_read():
    assert metric_of(["failure_ratio=0.01", "e2el_p90_ms=900", "ttft_p99_ms=500"], LEVEL) == "ttft_p99_ms"
    held = {**LEVEL, "slo": [{"name": "ttft_p99_ms", "passed": True}]}
    assert metric_of(["failure_ratio=0.01", "tpot_p90_ms=50"], held) == "tpot_p90_ms"  # the first latency SLO
    result = {"decisive_level": "level-03", "levels": [{"name": "level-02"}, LEVEL]}
    assert where_it_broke(result) is LEVEL and where_it_broke({**result, "decisive_level": None}) is None


def test_each_lever_tried_is_a_row_refused_in_vllms_words_or_judged_by_its_interval():
    current = Arm("current", Config(), [400.0, 410.0, 395.0])
    better = Arm("1-max-num-seqs", Config(), [50.0, 52.0, 49.0])
    refused = Arm("2-kv-cache-dtype", Config(), refused="ValueError: fp8 is not supported on CPU")
    levers = [(LEVERS[0], Change("--max-num-seqs", "2", "8")), (LEVERS[4], Change("--kv-cache-dtype", None, "fp8"))]
    rows = step_rows(1, {"limit": "batch_slots", "evidence": {"max_num_seqs": 2}}, [current, better, refused], levers,
                     "ttft_p99_ms")
    assert [r["verdict"] for r in rows] == ["rejected", "refused"]  # the command adopts the best that passes
    assert rows[0]["gain"]["ci_high"] < 0 and rows[0]["gain"]["change_pct"] < -80
    assert rows[1]["refused"] == "ValueError: fp8 is not supported on CPU" and rows[1]["gain"]["change_pct"] is None
    assert rows[0]["change"] == {"flag": "--max-num-seqs", "from": "2", "to": "8"}
    assert not gain(current, Arm("x", Config(), [401.0]), "ttft_p99_ms").passes  # one run: no interval


def test_the_configurations_measured_are_ranked_by_cost_per_output_token_where_priced():
    from loadwatch.tune.output import by_cost, markdown

    def capacity(knee: float, cost: float | None) -> dict:
        return {"max_sustainable": knee, "unit": "req/s", "undecided": None, "cost_per_million_output_tokens": cost}

    def step(n: int, verdict: str, after: dict | None) -> dict:
        return {"step": n, "limit": "kv_cache", "change": {"flag": "--max-num-seqs", "from": None, "to": "64"},
                "reason": "r", "verdict": verdict, "gain": {"metric": "ttft", "change_pct": None},
                "capacity_after": after, "limit_after": "x"}
    doc = {"baseline": {"vllm_args": [], "capacity": capacity(4.0, 3.0), "limit": "kv_cache"}, "final": None,
           "steps": [step(1, "adopted", capacity(6.0, 2.0)), step(2, "not adopted", None),
                     step(3, "adopted", capacity(5.0, 2.5))], "stopped": None}
    assert by_cost(doc) == [("step 1", 2.0), ("step 3", 2.5), ("baseline", 3.0)]
    assert "cheapest first: step 1 $2, step 3 $2.5, baseline $3." in markdown(doc)
    doc["baseline"]["capacity"]["cost_per_million_output_tokens"] = None
    for s in doc["steps"]:
        if s["capacity_after"]:
            s["capacity_after"]["cost_per_million_output_tokens"] = None
    assert by_cost(doc) == [] and "cheapest" not in markdown(doc)


def test_a_trial_whose_interval_spans_no_change_is_undecided_never_rejected():
    """The tune page's prefix scenario: both levers' intervals spanned 0, and both were reported rejected."""
    from loadwatch.tune.command import verdict_of

    arm = Arm("1-x", Config(), [1.0, 2.0, 3.0])
    verdict, settle = verdict_of(arm, {"change_pct": 21.9, "ci_low": -78.0, "ci_high": 574.3}, 3)
    assert verdict == "undecided" and "[-78.0 %, +574.3 %] spans no change" in settle and "the 3 rounds" in settle
    assert verdict_of(arm, {"change_pct": 36.9, "ci_low": -41.8, "ci_high": 221.9}, 3)[0] == "undecided"
    assert verdict_of(arm, {"change_pct": 40.0, "ci_low": 10.0, "ci_high": 80.0}, 3) == ("rejected", None)  # worse
    assert verdict_of(arm, {"change_pct": -60.0, "ci_low": -70.0, "ci_high": -50.0}, 3) == ("rejected", None)
    assert verdict_of(arm, {"change_pct": None, "ci_low": None, "ci_high": None}, 1)[0] == "undecided"
    refused = Arm("2-y", Config(), refused="ValueError")
    assert verdict_of(refused, {"change_pct": None, "ci_low": None, "ci_high": None}, 0) == ("refused", None)
