"""What the recorder exports for sessions, tools and caches, as Prometheus reads it."""

from prometheus_client import generate_latest
from prometheus_client.openmetrics import exposition as openmetrics

from loadwatch.loadgen.exposition import client_registry
from loadwatch.loadgen.recorder import LLMRequest, Recorder
from loadwatch.loadgen.state import RunState
from loadwatch.metrics.definitions import turn_bucket
from loadwatch.metrics.slo import parse_slo
from loadwatch.metrics.timing import RawTiming, request_metrics


def test_turns_fall_in_bounded_buckets():
    assert [turn_bucket(t) for t in (None, 1, 2, 3, 4, 5, 8, 9, 400)] == ["", "1", "2", "3-4", "3-4", "5-8", "5-8",
                                                                          "9+", "9+"]


def test_session_turns_label_the_latencies_and_tool_calls_and_cache_are_counted():
    state = RunState(["agent"], "http://x")
    recorder = state.recorder
    for turn in (1, 2, 3, 4, None):
        timing = RawTiming(0.0, (0.1, 0.2, 0.3), prompt_tokens=100, completion_tokens=3, answer_at=0.2,
                           cached_tokens=80, tool_calls=2)
        recorder.record(LLMRequest("m", "agent", 1.0, 0.3, request_metrics(timing), turn=turn))
    text = generate_latest(client_registry(state, lambda: 0)).decode()
    ttft, ttfa, cached = (f"loadwatch_client_{name}" for name in ("time_to_first_token_seconds",
                                                                   "time_to_first_answer_token_seconds",
                                                                   "cached_prompt_tokens_ratio"))
    assert f'{ttft}_count{{model="m",replica="",scenario="agent",turn="3-4"}} 2.0' in text
    # Outside a session the label is empty, which Prometheus stores as no label: series stay as they were.
    assert f'{ttft}_count{{model="m",replica="",scenario="agent",turn=""}} 1.0' in text
    assert f'{ttfa}_sum{{model="m",replica="",scenario="agent",turn="1"}} 0.2' in text
    assert f'{cached}_bucket{{le="0.75",model="m",replica="",scenario="agent",turn="2"}} 0.0' in text
    assert f'{cached}_bucket{{le="0.9",model="m",replica="",scenario="agent",turn="2"}} 1.0' in text
    assert 'loadwatch_client_tool_calls_total{model="m",scenario="agent"} 10.0' in text


def test_ttft_and_e2e_carry_the_request_id_as_an_exemplar_in_openmetrics_only():
    state = RunState(["chat"], "http://x")
    timing = RawTiming(0.0, (0.1, 0.2, 0.3), prompt_tokens=10, completion_tokens=3)
    state.recorder.record(LLMRequest("m", "chat", 1000.0, 0.3, request_metrics(timing), request_id="abc123"))
    registry = client_registry(state, lambda: 0)
    open_metrics = openmetrics.generate_latest(registry).decode()
    assert ('loadwatch_client_time_to_first_token_seconds_bucket{le="0.1",model="m",'
            'replica="",scenario="chat",turn=""} 1.0 '
            '# {request_id="abc123"} 0.1 1000.1') in open_metrics
    assert '# {request_id="abc123"} 0.3 1000.3' in open_metrics  # E2E
    assert open_metrics.count("request_id=") == 2  # not on ITL or TPOT
    assert "request_id" not in generate_latest(registry).decode()  # the text format has no exemplars


def test_open_loop_arrivals_are_counted_outside_warmup_and_every_drop_is_counted():
    from loadwatch.catalogue import Client
    from loadwatch.metrics import definitions as d

    recorder = RunState(["chat"], "http://x").recorder
    labels = ("m", "chat")
    recorder.record_arrival(labels, "load", 100.0, 100.002, warmup=False)
    recorder.record_arrival(labels, "load", 100.1, 100.6, warmup=True)
    recorder.record_drop(labels, "load", 100.2)
    recorder.record_drop(labels, "load", 100.3)
    (_, lag), = recorder.counts.histograms_named(d.ARRIVAL_LAG.name)
    assert sum(lag.counts) == 1
    assert dict(recorder.counts.counters_named(Client.ARRIVALS_DROPPED)) == {labels: 2.0}
    arrivals = recorder.samples.of((*labels, "load")).arrivals
    assert (arrivals.sent, arrivals.dropped, arrivals.due, arrivals.at) == (1, 2, [100.0, 100.3], [100.002, 100.3])


def test_how_busy_each_process_was_counts_from_the_runs_start():
    from loadwatch.catalogue import Client

    recorder = RunState(["chat"], "http://x").recorder
    recorder.counts.inc(Client.CPU, ("1",), 3.0)  # before the run: imports and connections
    recorder.start_run()
    recorder.counts.inc(Client.CPU, ("1",), 5.0)
    recorder.counts.inc(Client.CPU, ("master",), 0.5)
    assert recorder.busy(10.0) == {"1": 0.5, "master": 0.05}
    assert recorder.busy(0.0) == {}


def test_a_cancelled_request_is_counted_apart_with_its_ttft_only_where_it_got_that_far():
    from loadwatch.catalogue import Client
    from loadwatch.metrics import definitions as d
    from loadwatch.metrics.records import CANCELLED

    state = RunState(["chat"], "http://x")
    recorder = state.recorder
    recorder.configure([], keep_records=True, keep_itl=False)
    recorder.record(LLMRequest("m", "chat", 1000.0, 0.3, cancelled=True, cancelled_ttft=0.1, request_id="a"))
    recorder.record(LLMRequest("m", "chat", 1001.0, 0.05, cancelled=True, request_id="b"))  # before its first token
    series = recorder.samples.of(("m", "chat", "load"))
    assert (series.cancelled, series.completed, series.failed, recorder.finished) == (2, 0, 0, 2)
    assert series.latency["ttft"].count == 1 and series.latency["e2el"].count == 0
    assert dict(recorder.counts.counters_named(Client.CANCELLED)) == {("m", "chat"): 2.0}
    (_, ttft), = recorder.counts.histograms_named(d.TTFT.name)
    assert sum(ttft.counts) == 1
    assert [(r["failure"], r["ttft_s"]) for r in recorder.take_records()] == [(CANCELLED, 0.1), (CANCELLED, None)]


def test_an_embedding_has_no_ttft_and_images_are_counted_as_sent():
    from loadwatch.catalogue import Client

    state = RunState(["chat"], "http://x")
    recorder = state.recorder
    pooled = request_metrics(RawTiming(0.0, (), prompt_tokens=12, completion_tokens=None, headers_at=0.01,
                                       answered_at=0.05))
    assert (pooled.ttft, pooled.e2e, pooled.itl, pooled.tpot) == (None, 0.05, (), None)
    recorder.record(LLMRequest("m", "chat", 1.0, 0.05, pooled, request_id="e"))
    recorder.record(LLMRequest("m", "chat", 2.0, 0.2, failure_reason="http_400", images=3, image_bytes=900))
    text = generate_latest(client_registry(state, lambda: 0)).decode()
    assert 'loadwatch_client_e2e_request_latency_seconds_count{model="m",replica="",scenario="chat",turn=""} 1.0' \
        in text
    assert 'loadwatch_client_time_to_first_token_seconds_count{model="m",replica="",scenario="chat",turn=""}' \
        not in text
    assert 'loadwatch_client_prompt_tokens_total{model="m",scenario="chat"} 12.0' in text
    assert dict(recorder.counts.counters_named(Client.IMAGES)) == {("m", "chat"): 3.0}  # sent, though it failed
    assert dict(recorder.counts.counters_named(Client.IMAGE_BYTES)) == {("m", "chat"): 900.0}
    assert not recorder.recent  # the slowest are by TTFT


def test_the_runs_slos_are_exported_as_objectives_and_absent_without_any():
    state = RunState(["chat"], "http://x")
    assert "loadwatch_slo_objective" not in generate_latest(client_registry(state, lambda: 0)).decode()
    slos = [parse_slo("ttft_p99_ms=600"), parse_slo("failure_ratio=0.01")]
    text = generate_latest(client_registry(state, lambda: 0, lambda: slos)).decode()
    assert 'loadwatch_slo_objective{slo="ttft_p99_ms"} 600.0' in text
    assert 'loadwatch_slo_objective{slo="failure_ratio"} 0.01' in text


def test_a_workers_report_spans_from_its_first_request_then_from_its_previous_report(monkeypatch):
    """The master's estimate of a lost worker's rate divides by this span: counted from the run's
    start, or from an empty report sent before the first request, it took the worker's start-up for
    idle time, and the rate came out low (a CI run's cut host: 203 unknown for 264 unaccounted)."""
    recorder = Recorder()
    recorder.start_run()
    now = iter([103.0, 110.0, 113.0, 116.0])
    monkeypatch.setattr("loadwatch.loadgen.recorder.time.time", lambda: next(now))
    assert recorder.report()["span"] == 0.0  # nothing sent yet: no span, no rate
    recorder.record(LLMRequest("m", "chat", 106.0, 0.3, failure_reason="http_500"))
    recorder.record(LLMRequest("m", "chat", 105.0, 0.3, failure_reason="http_500"))
    assert recorder.report()["span"] == 5.0  # from the first request, not the empty report before it
    assert recorder.report()["span"] == 3.0
    recorder.start_run()
    assert recorder.report()["span"] == 0.0


def test_a_rejected_request_is_counted_apart_by_its_reason_and_never_as_a_failure():
    from loadwatch.catalogue import Client
    from loadwatch.metrics.records import REJECTED

    state = RunState(["chat"], "http://x")
    recorder = state.recorder
    recorder.configure([], keep_records=True, keep_itl=False)
    recorder.record(LLMRequest("m", "chat", 1000.0, 0.01, None, "http_503", rejection="max_num_queued_reqs",
                               request_id="a"))
    recorder.record(LLMRequest("m", "chat", 1000.1, 0.4, None, "stream_error", rejection="max_num_queued_tokens",
                               request_id="b"))
    recorder.record(LLMRequest("m", "chat", 1000.2, 0.01, None, "http_503", request_id="c"))  # a proxy's 503
    series = recorder.samples.of(("m", "chat", "load"))
    assert (series.rejected, series.failed, series.completed, recorder.finished) == (2, 1, 0, 3)
    assert dict(recorder.counts.counters_named(Client.REJECTED)) == {
        ("m", "chat", "max_num_queued_reqs"): 1.0, ("m", "chat", "max_num_queued_tokens"): 1.0}
    assert dict(recorder.counts.counters_named(Client.FAILURES)) == {("m", "chat", "http_503"): 1.0}
    assert dict(recorder.counts.counters_named(Client.REQUESTS)) == {("m", "chat"): 3.0}
    assert [(r["failure"], r.get("rejection")) for r in recorder.take_records()] == [
        (REJECTED, "max_num_queued_reqs"), (REJECTED, "max_num_queued_tokens"), ("http_503", None)]
    exposed = generate_latest(client_registry(state, lambda: 0)).decode()
    assert ('loadwatch_client_requests_rejected_total{model="m",reason="max_num_queued_reqs",scenario="chat"} 1.0'
            in exposed)
