"""A server that refuses past its admission cap (vLLM's --max-num-queued-reqs or
--max-num-queued-tokens): capacity names the limit `admission` with its evidence, tells "holds the SLO by
refusing x %" from "holds it outright", and, where a server queued without refusing past the knee,
sizes the cap that would have refused the excess (issue 61)."""

from __future__ import annotations

from loadwatch.capacity.diagnose import diagnose, overload
from loadwatch.capacity.levels import Level
from loadwatch.capacity.output import conclusion, markdown

TTFT = {"name": "ttft_p99_ms", "limit": 500.0, "measured": 310.0, "passed": True}
ALLOWED = {"name": "rejected_ratio", "limit": 0.05, "measured": 0.02, "passed": True}
REFUSING = {"completed": 200, "rejected": 50, "rejected_ratio": 0.2, "p99_ttft_ms": 310.0,
            "rejections": {"max_num_queued_reqs": 50}, "slo": [TTFT], "request_throughput": 4.0}
ENGINE = {"admission_rejections": 50.0, "requests_waiting_peak": 1.0, "requests_running_peak": 2.0}


def test_a_server_that_refuses_is_limited_by_admission_with_its_evidence():
    diagnosis = diagnose(REFUSING, ENGINE, {})
    assert diagnosis.limit == "admission"
    evidence = diagnosis.evidence
    assert evidence["rejections"] == {"max_num_queued_reqs": 50} and evidence["rejected_ratio"] == 0.2
    assert evidence["server_admission_rejections"] == 50.0  # the server's count beside the client's
    assert evidence["admitted_within_slo"] is True and evidence["admitted_slo"] == {"ttft_p99_ms": 310.0}
    slow = {**REFUSING, "slo": [{**TTFT, "measured": 900.0, "passed": False}]}
    assert diagnose(slow, ENGINE, {}).evidence["admitted_within_slo"] is False


def test_refusals_a_rejected_ratio_slo_allows_leave_the_usual_limit():
    allowed = {**REFUSING, "rejected_ratio": 0.02, "slo": [TTFT, ALLOWED]}
    assert diagnose(allowed, ENGINE, {}).limit != "admission"
    over = {**allowed, "slo": [TTFT, {**ALLOWED, "measured": 0.2, "passed": False}]}
    assert diagnose(over, ENGINE, {}).limit == "admission"


def test_a_level_holds_outright_holds_by_refusing_or_breaks_by_refusing():
    outright = Level(1, 4.0, "users", "level-01", results={"completed": 200, "slo": [TTFT]})
    assert outright.passed and outright.verdict == "held"
    refusing = Level(2, 8.0, "users", "level-02", results=REFUSING)
    assert not refusing.passed, "a refusal breaks a level no rejected_ratio SLO allows it to"
    assert refusing.verdict == "broke (the server refused 20.0% of its requests)"
    allowed = Level(2, 8.0, "users", "level-02", results={**REFUSING, "rejected_ratio": 0.02, "slo": [TTFT, ALLOWED]})
    assert allowed.passed and allowed.verdict == "held by refusing 2.0% of its requests"


def test_the_report_says_the_knee_held_by_refusing_and_the_refusals_by_level():
    held = Level(1, 8.0, "users", "level-01", results={**REFUSING, "rejected": 4, "rejected_ratio": 0.02,
                                                        "slo": [TTFT, ALLOWED]})
    broke = Level(2, 16.0, "users", "level-02", results={**REFUSING, "slo": [TTFT, {**ALLOWED, "measured": 0.2,
                                                                                     "passed": False}]},
                  engine=ENGINE)
    diagnosis = diagnose(broke.results, broke.engine, {})
    diagnosis.evidence["rejections_per_level"] = [{"level": 8.0, "rejected": 4, "rejected_ratio": 0.02},
                                                  {"level": 16.0, "rejected": 50, "rejected_ratio": 0.2}]
    result = conclusion("users", "users", [held, broke], 8.0, diagnosis, 0.8, "the rule", decisive=broke)
    assert result.rejected_ratio_at_max == 0.02 and result.limit == "admission"
    text = markdown(result)
    assert "sustained within its SLOs by refusing 2.0% of its requests" in text
    assert "The server's refusals by level: 8 users 2.0% (4), 16 users 20.0% (50)" in text
    assert "by reason at that level: max_num_queued_reqs 50" in text


def test_a_queue_past_the_batch_without_refusals_sizes_both_caps_from_the_ttft_slo_and_what_was_served():
    results = {"completed": 300, "p99_ttft_ms": 4200.0, "request_throughput": 6.5,
               "slo": [{**TTFT, "measured": 4200.0, "passed": False}]}
    engine = {"requests_waiting_peak": 40.0, "requests_running_peak": 8.0, "prompt_tokens_per_second": 2400.0}
    found = overload(results, engine)
    assert found is not None and found["max_num_queued_tokens"] == 1200  # 0.5 s times 2,400 tokens a second
    assert found["max_num_queued_reqs"] == 11  # the batch of 8, and 3 of the 6.5 a second complete in 0.5 s
    assert "--max-num-queued-tokens 1200" in found["explanation"]
    assert "--max-num-queued-reqs 11" in found["explanation"]
    assert overload({**results, "rejected": 3}, engine) is None, "a server that refuses already has the cap"
    assert overload(results, {**engine, "requests_waiting_peak": 4.0}) is None, "a queue shorter than the batch"
    untargeted = overload({**results, "slo": []}, engine)
    assert untargeted["max_num_queued_tokens"] is None and untargeted["max_num_queued_reqs"] is None  # no target
