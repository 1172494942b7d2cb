"""How a step is judged: the SLO a trial is judged on, the load it runs at, and its verdicts."""

from pathlib import Path

from loadwatch.metrics.capacity import Capacity, CapacityLevel
from loadwatch.metrics.slo import parse_slo
from loadwatch.metrics.tune import Tune
from loadwatch.tune.command import metric_of, step_rows, where_it_broke
from loadwatch.tune.config import Change, Config
from loadwatch.tune.levers import LEVERS
from loadwatch.tune.trial import Arm, gain

LEVEL = CapacityLevel(name="level-03", level=3.0, unit="users", passed=False,
                      slo=[{"name": "e2el_p90_ms", "passed": True}, {"name": "ttft_p99_ms", "passed": False}])


def test_a_trial_is_judged_on_the_slo_that_broke_at_the_level_the_diagnosis_read():
    def slos(*texts: str) -> list:
        return [parse_slo(text) for text in texts]

    assert metric_of(slos("failure_ratio=0.01", "e2el_p90_ms=900", "ttft_p99_ms=500"), LEVEL) == "ttft_p99_ms"
    held = LEVEL.model_copy(update={"slo": [{"name": "ttft_p99_ms", "passed": True}]})
    assert metric_of(slos("failure_ratio=0.01", "tpot_p90_ms=50"), held) == "tpot_p90_ms"  # the first latency SLO
    result = Capacity(mode="users", unit="users", max_sustainable=2.0, decisive_level="level-03",
                      levels=[CapacityLevel(name="level-02", level=2.0, unit="users", passed=True), LEVEL])
    assert where_it_broke(result) == LEVEL
    assert where_it_broke(result.model_copy(update={"decisive_level": None})) is None


def test_each_lever_tried_is_a_row_refused_in_vllms_words_or_judged_by_its_interval():
    current = Arm("current", Config(), [400.0, 410.0, 395.0], goodput=[1.0, 1.1, 0.95])
    better = Arm("1-max-num-seqs", Config(), [50.0, 52.0, 49.0], goodput=[2.0, 2.1, 1.9])
    refused = Arm("2-kv-cache-dtype", Config(), refused="ValueError: fp8 is not supported on CPU")
    levers = [(LEVERS[0], Change("--max-num-seqs", "2", "8")), (LEVERS[4], Change("--kv-cache-dtype", None, "fp8"))]
    result = Capacity(mode="users", unit="users", max_sustainable=2.0, limit="batch_slots",
                      evidence={"max_num_seqs": 2})
    rows = step_rows(1, result, [current, better, refused], levers, "ttft_p99_ms")
    assert [r.verdict for r in rows] == ["rejected", "refused"]  # the command adopts the best that passes
    assert rows[0].gain.metric == "request_goodput" and (rows[0].gain.ci_low or 0) > 0
    assert rows[0].slo_change is not None and rows[0].slo_change.metric == "ttft_p99_ms"
    assert (rows[0].slo_change.change_pct or 0) < -80
    assert rows[1].refused == "ValueError: fp8 is not supported on CPU" and rows[1].gain.change_pct is None
    assert rows[0].model_dump(mode="json")["change"] == {"flag": "--max-num-seqs", "from": "2", "to": "8"}
    assert gain(current, Arm("x", Config(), [401.0], goodput=[3.0])).open  # one run: no interval


def test_the_configurations_measured_are_ranked_by_cost_per_output_token_where_priced():
    from loadwatch.tune.output import by_cost, markdown

    def capacity(knee: float, cost: float | None) -> dict:
        return {"max_sustainable": knee, "unit": "req/s", "undecided": None, "cost_per_million_output_tokens": cost}

    def step(n: int, verdict: str, after: dict | None) -> dict:
        return {"step": n, "limit": "kv_cache", "change": {"flag": "--max-num-seqs", "from": None, "to": "64"},
                "reason": "r", "verdict": verdict, "gain": {"metric": "ttft", "change_pct": None},
                "capacity_after": after, "limit_after": "x", "runs": {}}
    doc = Tune.model_validate({
        "budget_s": 3600, "baseline": {"vllm_args": [], "capacity": capacity(4.0, 3.0), "limit": "kv_cache"},
        "steps": [step(1, "adopted", capacity(6.0, 2.0)), step(2, "rejected", None),
                  step(3, "adopted", capacity(5.0, 2.5))]})
    assert by_cost(doc) == [("step 1", 2.0), ("step 3", 2.5), ("baseline", 3.0)]
    assert "cheapest first: step 1 $2, step 3 $2.5, baseline $3." in markdown(doc)
    for measured in (doc.baseline.capacity, *(s.capacity_after for s in doc.steps)):
        if measured:
            measured.cost_per_million_output_tokens = None
    assert by_cost(doc) == [] and "cheapest" not in markdown(doc)


def test_a_trial_whose_interval_spans_no_change_is_undecided_never_rejected():
    """The tune page's prefix scenario: both levers' intervals spanned 0, and both were reported rejected."""
    from loadwatch.tune.command import verdict_of

    current = Arm("current", Config(), [409.0, 509.0, 882.0], goodput=[30.0, 20.0, 40.0])
    spread = Arm("1-x", Config(), [300.0, 700.0, 500.0], goodput=[15.0, 45.0, 35.0])
    verdict, settle, by = verdict_of(current, spread, "ttft_p90_ms")
    assert verdict == "undecided" and by is None
    assert "spans no change, nor does ttft_p90_ms's decide it" in settle and "the 3 rounds" in settle
    worse = Arm("2-y", Config(), [900.0, 950.0, 990.0], goodput=[10.0, 11.0, 9.0])
    assert verdict_of(current, worse, "ttft_p90_ms") == ("rejected", None, "request_goodput")  # worse beyond doubt
    one = Arm("3-z", Config(), [100.0], goodput=[50.0])
    verdict, settle, _ = verdict_of(current, one, "ttft_p90_ms")
    assert verdict == "undecided" and "gave no interval" in settle
    refused = Arm("4-w", Config(), refused="ValueError")
    assert verdict_of(current, refused, "ttft_p90_ms") == ("refused", None, None)


def test_where_goodput_is_too_spread_to_tell_a_decisive_slo_metric_pointing_the_same_way_decides():
    """The tune guide's slots scenario, 2026-11-27, four rounds on a busy machine: the current
    configuration served 0.007 to 2.5 req/s within the SLO, so goodput's interval spanned everything
    while TTFT p90 fell 97 % beyond doubt."""
    from loadwatch.tune.command import gain_words, step_rows
    from loadwatch.tune.trial import better, decide

    current = Arm("current", Config(), [2065.6, 2989.2, 937.1, 1011.0], goodput=[0.684, 0.0073, 2.475, 2.426])
    seqs = Arm("1-max-num-seqs", Config(), [45.1, 75.4, 22.8, 81.9], goodput=[2.861, 2.324, 5.366, 1.664])
    assert gain(current, seqs).open and gain(current, seqs).change_pct > 0
    assert decide(current, seqs, "ttft_p90_ms").metric == "ttft_p90_ms" and better(current, seqs, "ttft_p90_ms")
    result = Capacity(mode="users", unit="users", max_sustainable=3.0, limit="batch_slots")
    row = step_rows(1, result, [current, seqs], [(LEVERS[0], Change("--max-num-seqs", "2", "8"))], "ttft_p90_ms")[0]
    assert row.decided_by == "ttft_p90_ms" and row.verdict == "rejected"  # until the command adopts the best
    assert "(decided by ttft_p90_ms" in gain_words(row)
    # A witness against goodput's own direction is no witness: a lower TTFT bought with less served.
    traded = Arm("2-x", Config(), [45.1, 75.4, 22.8, 81.9], goodput=[0.3, 0.002, 1.9, 1.5])
    assert gain(current, traded).change_pct < 0 and decide(current, traded, "ttft_p90_ms") is None
    assert not better(current, traded, "ttft_p90_ms")


def test_a_trial_goes_on_for_the_undecided_levers_while_its_share_lasts_then_stops():
    """A B B A for the rounds asked; then the current arm and the undecided levers only (those that
    might beat one better beyond doubt), alternating, while a round fits in the trial's share and
    EXTENSION times the rounds asked are not spent."""
    from loadwatch.tune.trial import EXTENSION, next_round

    M = "ttft_p90_ms"  # the arms carry no SLO metric's values: goodput alone decides here

    current = Arm("current", Config(), goodput=[1.0, 1.2, 0.8])
    decided = Arm("1-a", Config(), goodput=[3.0, 3.1, 2.9])
    undecided = Arm("2-b", Config(), goodput=[0.9, 1.4, 1.1])
    refused = Arm("3-c", Config(), refused="no")
    arms = [current, decided, undecided, refused]
    assert next_round(arms, 0, 3, 0.0, 0.0, M) == [current, decided, undecided]  # the rounds asked: all that start
    assert next_round(arms, 1, 3, 60.0, 0.0, M) == [undecided, decided, current]  # backwards on even rounds
    assert next_round(arms, 3, 3, 60.0, 600.0, M) == []  # 1-a is better beyond doubt, and 2-b points lower
    hopeful = Arm("2-b", Config(), goodput=[1.0, 4.0, 9.0])  # undecided, but pointing above 1-a's +200 %
    arms = [current, decided, hopeful, refused]
    assert next_round(arms, 3, 3, 60.0, 600.0, M) == [hopeful, current]  # round 4: the open lever, backwards
    assert next_round(arms, 4, 3, 60.0, 600.0, M) == [current, hopeful]
    assert next_round([current, undecided], 3, 3, 60.0, 600.0, M) == [undecided, current]  # nothing passes yet
    assert next_round(arms, 3, 3, 60.0, 100.0, M) == []  # two runs of 60 s do not fit in 100 s
    assert next_round(arms, EXTENSION * 3, 3, 60.0, 10_000.0, M) == []
    assert next_round([current, decided], 3, 3, 60.0, 10_000.0, M) == []  # nothing open
    assert next_round([current, refused], 0, 3, 0.0, 0.0, M) == []  # no lever started: nothing to compare


def test_goodput_is_judged_with_a_run_that_met_no_slo_counted_as_half_a_request():
    from loadwatch.tune.trial import goodput_of

    assert goodput_of({"request_goodput": 2.5, "duration": 20.0}) == 2.5
    assert goodput_of({"request_goodput": 0.0, "duration": 20.0}) == 0.025
    assert goodput_of({}) is None and goodput_of({"request_goodput": 0.0}) is None


def test_a_stack_that_fails_to_start_is_started_again_and_never_makes_the_lever_refused(tmp_path):
    """A trial's run whose sidecar lost its port to another process (the slots benchmark beside a
    test that held 9647) was reported as vLLM refusing --max-num-seqs: the stack's own failure is
    tried once more, then ends tune, and only the server's refusal is the arm's."""
    from contextlib import contextmanager

    import pytest

    from loadwatch.capacity.options import CapacityOptions
    from loadwatch.engine.process import EngineError
    from loadwatch.loadrun.locust import LocustRun
    from loadwatch.stack.stack import StackError
    from loadwatch.tune.trial import run_trial

    class Failing:
        def __init__(self, *errors: Exception):
            self.errors, self.folders = list(errors), []

        @contextmanager
        def serving(self, config, folder, say):
            self.folders.append(folder.name)
            raise self.errors.pop(0)
            yield

    def trial(server) -> list[Arm]:
        arms = [Arm("current", Config()), Arm("1-max-num-seqs", Config(("--max-num-seqs=8",)))]
        run_trial(arms, server, LocustRun(Path("chat.py")), CapacityOptions(), 4.0, "users", "ttft_p90_ms", 2,
                  tmp_path, lambda: 600.0, lambda: 600.0, lambda message: None)
        return arms

    taken = StackError("Prometheus had not scraped the sidecar after 60 s")
    server = Failing(taken, StackError("again"))
    with pytest.raises(StackError, match="again"):
        trial(server)
    assert server.folders == ["r1", "r1-again"]  # once more, in a folder of its own; then tune ends
    refusing = Failing(EngineError("ValueError: max_num_seqs too large"), EngineError("x"), EngineError("y"))
    arms = trial(refusing)
    assert [arm.refused for arm in arms] == ["ValueError: max_num_seqs too large", "x"]  # the server's own words


def test_tune_ended_by_its_stack_says_the_stack_not_the_server(tmp_path, monkeypatch):
    """The second StackError of a trial run ends tune: its `stopped` names the stack that failed, not
    the server, which the lever was never refused by."""

    from loadwatch.capacity.options import CapacityOptions
    from loadwatch.loadrun.locust import LocustRun
    from loadwatch.stack.stack import StackError
    from loadwatch.tune import command
    from loadwatch.tune.options import TuneOptions

    batch = {"max_num_seqs": 2, "requests_running_peak": 2.0, "requests_waiting_peak": 3.0}
    broke = {"name": "level-04", "level": 4.0, "unit": "users", "passed": False,
             "slo": [{"name": "ttft_p90_ms", "passed": False}]}
    found = Capacity.model_validate({"mode": "users", "max_sustainable": 3.0, "unit": "users", "limit": "batch_slots",
                                     "evidence": batch, "levels": [broke], "decisive_level": "level-04"})
    monkeypatch.setattr(command.Tuner, "measure_capacity", lambda self, config, name: found)

    def trial(*args, **kwargs):
        raise StackError("sidecar: port 9647 is held by another process, pid 42 (python), which answered in its "
                         "place; stop that process, or start the stack again")

    monkeypatch.setattr(command, "run_trial", trial)
    template = LocustRun(Path("chat.py"), slo=[parse_slo("ttft_p90_ms=1000")])
    assert command.tune(CapacityOptions(), TuneOptions(), template, None, [], tmp_path, lambda message: None) == 1
    (run_dir,) = tmp_path.iterdir()
    stopped = Tune.read(run_dir / "tune.json").stopped or ""
    assert stopped.startswith("the stack did not start: sidecar: port 9647 is held") and "\n" not in stopped


def test_a_trial_run_whose_load_generator_left_no_results_is_the_stacks_failure_in_its_words(tmp_path, monkeypatch):
    """The slots benchmark lost a round silently: Locust could not bind its metrics port (another
    process held 9646) and the run simply had no value. Now it is the stack's failure, said in the
    load generator's last line, and the run is started again."""
    import pytest

    from loadwatch.capacity.options import CapacityOptions
    from loadwatch.loadrun.locust import Finished, LocustRun
    from loadwatch.stack.stack import StackError
    from loadwatch.tune.trial import measure

    said = "loadwatch: cannot serve metrics on 127.0.0.1:9646: Address already in use"

    def run(self, target, log, say, **kwargs):
        log.write_text(f"[2026-11-27 23:32:41] Starting Locust 2.47.0\n{said}\n")
        return Finished(1)

    monkeypatch.setattr(LocustRun, "run", run)
    monkeypatch.setattr(LocustRun, "figures", lambda self, partial=False: None)
    with pytest.raises(StackError, match=f"the load generator ended without results: {said}"):
        measure(LocustRun(Path("chat.py")), CapacityOptions(), 5.0, "users", "http://x", tmp_path, "ttft_p90_ms",
                lambda message: None)
