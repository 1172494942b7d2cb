import json

import numpy as np
import pytest
from pydantic import BaseModel, ValidationError

from loadwatch.loadgen.recorder import LLMRequest, Recorder
from loadwatch.metrics.results import Results
from loadwatch.metrics.samples import Samples
from loadwatch.metrics.sketch import ACCURACY
from loadwatch.metrics.slo import FORMS, SLO, Objective, parse_slo
from loadwatch.metrics.summary import format_block, summarize
from loadwatch.metrics.timing import RawTiming, request_metrics

WITHIN = ACCURACY  # the sketches' stated relative error against numpy on the same values


def as_results(figures: dict) -> Results:
    """The run's figures as the results file holds them, with the run's identity around them."""
    return Results.model_validate({"run_id": "r", "started_at": 0.0, "ended_at": 1.0, **figures})

def requests(stage=lambda i: "load") -> list[LLMRequest]:
    out = []
    for i in range(100):
        ttft = (100 + i) / 1000  # 100 ms .. 199 ms
        arrivals = tuple(ttft + k * 0.02 for k in range(10))
        out.append(LLMRequest("m", "chat", 1000.0 + i * 0.1, arrivals[-1],
                              request_metrics(RawTiming(0.0, arrivals, 10, 10)), stage=stage(i)))
    out.append(LLMRequest("m", "chat", 1000.05, 0.5, None, "http_500", stage=stage(0)))
    return out


def make_samples(slos=(), stage=lambda i: "load") -> Samples:
    recorder = Recorder()
    recorder.configure(list(slos), keep_records=False, keep_itl=False)
    for request in requests(stage):
        recorder.record(request)
    return recorder.samples


def test_figures_match_numpy_like_vllm_bench():
    result, _ = summarize(make_samples(), [])
    ttfts_ms = np.array([100 + i for i in range(100)], dtype=float)
    assert result["completed"] == 100 and result["failed"] == 1
    assert result["mean_ttft_ms"] == pytest.approx(ttfts_ms.mean())  # exact
    assert result["std_ttft_ms"] == pytest.approx(ttfts_ms.std())  # exact
    assert result["median_ttft_ms"] == pytest.approx(np.median(ttfts_ms), rel=WITHIN)
    assert result["p99_ttft_ms"] == pytest.approx(np.percentile(ttfts_ms, 99), rel=WITHIN)
    assert result["median_tpot_ms"] == pytest.approx(20.0, rel=WITHIN)
    assert result["median_itl_ms"] == pytest.approx(20.0, rel=WITHIN)
    # Window: first start 1000.0 to last end 1009.9 + 0.199 + 0.18.
    assert result["duration"] == pytest.approx(9.9 + 0.199 + 0.18)
    assert result["request_throughput"] == pytest.approx(100 / result["duration"])
    assert result["output_throughput"] == pytest.approx(1000 / result["duration"])
    assert result["total_token_throughput"] == pytest.approx(2000 / result["duration"])
    assert result["failures"] == {"http_500": 1}
    assert list(result["scenarios"]) == ["chat (m)"]


def test_goodput_counts_requests_meeting_every_latency_slo():
    slos = [parse_slo("ttft_p99_ms=150"), parse_slo("tpot_median_ms=50")]
    result, verdicts = summarize(make_samples(slos), slos)
    # TTFT <= 150 ms for the first 51 requests (100..150 ms); TPOT is 20 ms for all.
    assert result["request_goodput"] == pytest.approx(51 / result["duration"])
    assert [v.passed for v in verdicts] == [False, True]
    assert verdicts[0].measured == pytest.approx(np.percentile(np.arange(100, 200), 99), rel=WITHIN)


def test_failure_ratio_and_no_data():
    slos = [parse_slo("failure_ratio=0.001"), parse_slo("itl_p90_ms=100")]
    _, verdicts = summarize(make_samples(), slos)
    assert verdicts[0].measured == pytest.approx(1 / 101) and not verdicts[0].passed
    _, empty = summarize(Samples(), slos)
    assert all(v.measured is None and not v.passed for v in empty)


def test_block_has_vllm_bench_lines_and_slo_verdicts():
    result, verdicts = summarize(make_samples(), [parse_slo("ttft_p99_ms=150")])
    block = format_block(as_results(result), verdicts)
    lines = block.splitlines()
    assert lines[0] == "============ Serving Benchmark Result ============"
    assert "Successful requests:                     100       " in lines
    median = next(line for line in lines if line.startswith("Median TTFT (ms):"))
    assert float(median.split()[-1]) == pytest.approx(149.5, rel=WITHIN)
    assert any(line.startswith("SLO ttft_p99_ms: BROKEN (measured 19") and line.endswith(" ms, limit 150 ms)")
               for line in lines)
    assert lines[-1] == "=" * 50


@pytest.mark.parametrize(
    "text", ["ttft_p99=500", "ttft_p100_ms=1", "speed_p99_ms=1", "failure_ratio=2", "ttft_p99_ms=-1", "ttft_p99_ms=x"]
)
def test_bad_slos_are_refused_with_a_reason_and_what_an_slo_is(text):
    with pytest.raises(ValueError, match=text.split("=")[0]) as refused:
        parse_slo(text)
    assert str(refused.value).endswith(FORMS) and "\n" not in str(refused.value)


def test_good_slos_parse_and_read_back_from_their_text():
    assert parse_slo("e2el_median_ms=20000").limit == 20000
    assert parse_slo("tpot_p99.9_ms=50").stat == "p99.9"
    assert parse_slo("failure_ratio=0.01").metric == "failure_ratio"
    for text in ("ttft_p99_ms=500", "failure_ratio=0.01", "e2el_p90_ms=1234567.5", "itl_mean_ms=1e-07"):
        assert str(parse_slo(text)) == text


def test_a_model_takes_an_slo_as_its_text_and_writes_it_back_so():
    class Given(BaseModel):
        slo: list[Objective] = []

    given = Given.model_validate({"slo": ["ttft_p99_ms=500"]})
    assert given.slo == [SLO("ttft_p99_ms", 500.0)] and given.model_dump(mode="json") == {"slo": ["ttft_p99_ms=500"]}
    with pytest.raises(ValidationError, match="unknown SLO"):
        Given.model_validate({"slo": ["speed_p99_ms=1"]})


def test_each_stage_counts_the_requests_sent_in_it_over_its_own_time():
    samples = make_samples(stage=lambda i: "step-1" if i < 50 else "step-2")  # the failure is step-1's
    recorder = Recorder()
    recorder.samples = samples
    recorder.record(LLMRequest("m", "chat", 1005.0, 0.95, request_metrics(RawTiming(0.0, (0.9, 0.95), 2, 2)),
                               stage="step-2"))
    stages = [{"name": "step-1", "level": 2, "unit": "users", "start": 1000.0, "end": 1005.0},
              {"name": "step-2", "level": 4, "unit": "users", "start": 1005.0, "end": 1010.0}]
    result, _ = summarize(samples, [], stages)
    first, second = result["stages"]
    assert (first["name"], first["completed"], first["failed"]) == ("step-1", 50, 1)
    assert first["failures"] == {"http_500": 1}
    assert second["completed"] == 51 and second["failed"] == 0
    assert second["request_throughput"] == pytest.approx(51 / 5.0)
    # The stage's own request brings its 900 ms TTFT and its one 50 ms gap with it, no other's.
    assert second["p99_ttft_ms"] == pytest.approx(np.percentile([*range(150, 200), 900], 99), rel=WITHIN)
    assert second["mean_itl_ms"] == pytest.approx((50 * 9 * 20.0 + 50.0) / (50 * 9 + 1))
    assert "step-2" in format_block(as_results(result), [])


def _open_loop(samples: Samples, rate: float, n: int, late_by: float, stage: str = "load", start: float = 0.0) -> None:
    """`n` arrivals due every 1/rate s from `start`, each sent `late_by` times its due offset later (0: on time)."""
    arrivals = samples.of(("m", "chat", stage)).arrivals
    for i in range(n):
        due = start + i / rate
        arrivals.add(due, due + late_by * (due - start) + 0.001, sent=True)


def test_an_open_loop_that_kept_its_schedule_states_the_rates_and_lag_and_is_not_marked():
    samples = Samples()
    _open_loop(samples, 40.0, 401, late_by=0.0)
    result, _ = summarize(samples, [], request_rate=42.0)
    arrivals = Results.model_validate({"run_id": "r", "started_at": 0, "ended_at": 10, **result}).arrivals
    assert arrivals is not None and arrivals.sent == 401 and not arrivals.fell_short
    # The schedule as drawn, not the rate asked, is what the sends are held to.
    assert arrivals.requested_rate == 42.0 and arrivals.scheduled_rate == pytest.approx(40.0)
    assert arrivals.achieved_rate == pytest.approx(40.0) and arrivals.kept == pytest.approx(1.0)
    assert arrivals.lag_ms["median"] == pytest.approx(1.0, rel=0.01) and arrivals.lag_ms["max"] == pytest.approx(1.0)


def test_an_open_loop_whose_sends_fell_over_5_percent_behind_is_marked_in_its_results_and_block():
    samples = Samples()
    _open_loop(samples, 40.0, 401, late_by=0.08)  # the last arrival went out 0.8 s late over a 10 s schedule
    result, verdicts = summarize(samples, [], request_rate=40.0)
    results = Results.model_validate({"run_id": "r", "started_at": 0, "ended_at": 10, **result})
    assert results.arrivals is not None and results.arrivals.fell_short
    assert results.arrivals.achieved_rate == pytest.approx(40.0 / 1.08, rel=0.001)
    block = format_block(results, verdicts)
    assert "Requested rate (req/s):                  40.00" in block
    assert "Load generator CPU (of a core):" not in block  # nothing measured it
    busy = format_block(results.model_copy(update={"busy": {"1": 0.52, "master": 0.03}}), verdicts)
    assert "Load generator CPU (of a core):          worker 1 52%, master 3%" in busy
    assert "sent at 93% of the schedule's pace: the load generator, not the server, was the limit" in block


def test_dropped_arrivals_count_toward_the_schedule_kept_but_not_the_achieved_rate():
    samples = Samples()
    arrivals = samples.of(("m", "chat", "load")).arrivals
    for i in range(100):
        arrivals.add(i / 10, i / 10, sent=i % 2 == 0)
    result, verdicts = summarize(samples, [], request_rate=10.0)
    figures = result["arrivals"]
    assert (figures["sent"], figures["dropped"], figures["fell_short"]) == (50, 50, False)
    assert figures["achieved_rate"] == pytest.approx(5.0)
    results = Results.model_validate({"run_id": "r", "started_at": 0, "ended_at": 10, **result})
    assert "Dropped at --max-concurrency:            50" in format_block(results, verdicts)


def test_a_closed_loop_has_no_arrivals_and_a_stage_that_fell_behind_marks_the_run():
    closed = Samples()
    closed.of(("m", "chat", "load")).add_success(0.0, request_metrics(RawTiming(0.0, (0.1, 0.2), 5, 2)))
    assert "arrivals" not in summarize(closed, [])[0]
    swept = Samples()
    _open_loop(swept, 10.0, 101, late_by=0.0, stage="s1")
    _open_loop(swept, 40.0, 401, late_by=0.2, stage="s2", start=10.0)
    stages = [{"name": "s1", "level": 10.0, "unit": "requests/s", "start": 0.0, "end": 10.0},
              {"name": "s2", "level": 40.0, "unit": "requests/s", "start": 10.0, "end": 20.0}]
    result, _ = summarize(swept, [], stages, request_rate=40.0)
    assert [s["arrivals"]["requested_rate"] for s in result["stages"]] == [10.0, 40.0]
    assert [s["arrivals"]["fell_short"] for s in result["stages"]] == [False, True]
    assert result["arrivals"]["requested_rate"] is None and result["arrivals"]["fell_short"]


def test_arrivals_merge_exactly_across_workers():
    one, two = Samples(), Samples()
    _open_loop(one, 20.0, 200, late_by=0.0)
    _open_loop(two, 20.0, 200, late_by=0.0, start=0.025)
    master = Samples()
    master.merge(one.drain())
    master.merge(two.drain())
    figures = summarize(master, [], request_rate=40.0)[0]["arrivals"]
    assert figures["sent"] == 400 and figures["scheduled_rate"] == pytest.approx(40.0, rel=0.01)


def test_cancelled_requests_are_neither_completed_nor_failed_and_merge_across_workers():
    worker = Samples()
    worker.of(("m", "chat", "load")).add_cancelled(0.0, 0.2, 0.05)
    master = Samples()
    master.merge(worker.drain())
    result, verdicts = summarize(master, [])
    assert (result["cancelled"], result["completed"], result["failed"], result["failure_ratio"]) == (1, 0, 0, 0.0)
    results = Results.model_validate({"run_id": "r", "started_at": 0, "ended_at": 1, **result})
    assert "Cancelled requests (hung up):            1" in format_block(results, verdicts)


def rejected_run(slos=()) -> Samples:
    """make_samples' 100 completed and 1 failed, with 9 refused at admission (3 of them in a stream)."""
    recorder = Recorder()
    recorder.configure(list(slos), keep_records=False, keep_itl=False)
    for request in requests():
        recorder.record(request)
    for i in range(9):
        recorder.record(LLMRequest("m", "chat", 1001.0 + i * 0.1, 0.01, None, "stream_error" if i < 3 else "http_503",
                                   rejection="max_num_queued_tokens" if i < 3 else "max_num_queued_reqs"))
    return recorder.samples


def test_rejected_requests_are_their_own_outcome_and_the_totals_add_up():
    result, _ = summarize(rejected_run(), [])
    assert (result["completed"], result["failed"], result["rejected"], result["cancelled"]) == (100, 1, 9, 0)
    assert result["rejections"] == {"max_num_queued_reqs": 6, "max_num_queued_tokens": 3}
    assert result["failures"] == {"http_500": 1}  # never http_503 nor stream_error
    assert result["rejected_ratio"] == pytest.approx(9 / 110) and result["failure_ratio"] == pytest.approx(1 / 110)
    assert result["request_throughput"] == pytest.approx(100 / result["duration"])
    results = as_results(result)
    assert (results.rejected, results.rejections, results.rejected_ratio) == (9, result["rejections"],
                                                                             result["rejected_ratio"])


def test_a_rejected_request_is_never_good_and_goodput_counts_completed_requests_only():
    slos = [parse_slo("ttft_p99_ms=1000")]  # every completed request meets it
    result, _ = summarize(rejected_run(slos), slos)
    assert result["request_goodput"] == pytest.approx(100 / result["duration"])
    assert result["request_goodput"] == pytest.approx(result["request_throughput"])


def test_rejected_ratio_is_an_slo_mirroring_failure_ratio():
    slos = [parse_slo("rejected_ratio=0.05"), parse_slo("failure_ratio=0.05")]
    _, verdicts = summarize(rejected_run(), slos)
    assert [v.passed for v in verdicts] == [False, True]
    assert verdicts[0].measured == pytest.approx(9 / 110)
    assert verdicts[0].describe() == "SLO rejected_ratio: BROKEN (measured 0.08182, limit 0.05)"
    _, empty = summarize(Samples(), slos)
    assert all(v.measured is None and not v.passed for v in empty)
    with pytest.raises(ValueError, match="rejected_ratio is over 1"):
        parse_slo("rejected_ratio=1.5")
    assert str(parse_slo("rejected_ratio=0.01")) == "rejected_ratio=0.01"


def test_the_block_shows_rejections_by_reason_apart_from_failures():
    result, verdicts = summarize(rejected_run(), [])
    lines = format_block(as_results(result), verdicts).splitlines()
    assert "Failed requests:                         1         " in lines
    assert "Rejected requests (admission):           9         " in lines
    assert "max_num_queued_reqs:                     6         " in lines
    assert any(line.startswith("Rejected ratio:") and "8.18%" in line for line in lines)
    plain = format_block(as_results(summarize(make_samples(), [])[0]), []).splitlines()
    assert not any("Rejected" in line for line in plain)  # a run without a refusal says nothing of them


def test_rejections_merge_across_workers_and_read_back_from_records(tmp_path):
    from loadwatch.metrics.records import exact_samples

    worker = rejected_run()
    master = Samples()
    master.merge(worker.drain())
    assert summarize(master, [])[0]["rejections"] == {"max_num_queued_reqs": 6, "max_num_queued_tokens": 3}
    recorder = Recorder()
    recorder.configure([], keep_records=True, keep_itl=False)
    for request in requests():
        recorder.record(request)
    recorder.record(LLMRequest("m", "chat", 1001.0, 0.01, None, "http_503", rejection="max_num_queued_reqs"))
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recorder.take_records()))
    samples, _ = exact_samples(path, [])
    result = summarize(samples, [])[0]
    assert (result["completed"], result["failed"], result["rejected"]) == (100, 1, 1)


def test_a_traffic_split_gives_each_model_its_own_latency():
    recorder = Recorder()
    recorder.configure([], keep_records=False, keep_itl=False)
    for i in range(20):
        model, ttft = ("lora-1", 0.1) if i % 2 else ("lora-2", 0.4)
        arrivals = tuple(ttft + k * 0.02 for k in range(10))
        recorder.record(LLMRequest(model, "chat", 1000.0 + i * 0.1, arrivals[-1],
                                   request_metrics(RawTiming(0.0, arrivals, 10, 10))))
    result, _ = summarize(recorder.samples, [])
    models = as_results(result).models
    assert sorted(models) == ["lora-1", "lora-2"] and models["lora-1"].completed == 10
    assert models["lora-1"].latency("ttft", "median") == pytest.approx(100, rel=WITHIN)
    assert models["lora-2"].latency("ttft", "median") == pytest.approx(400, rel=WITHIN)
    assert models["lora-2"].latency("tpot", "median") == pytest.approx(20, rel=WITHIN)
    assert "models" not in summarize(make_samples(), [])[0]  # one model: the run's own figures say it
