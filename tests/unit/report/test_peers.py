"""The peers' result files read as loadwatch's results (issue 41), on our own samples laid out as
vllm bench serve 0.32, GuideLLM 0.8.1 and AIPerf 0.13.0 write them (their fields as those versions
wrote them against the fake server; the numbers our own)."""

from __future__ import annotations

import json

import pytest

from loadwatch.report.compare import compare, load_side
from loadwatch.report.peers import NotAPeer, read_peer

VLLM = {"date": "20261126-021500", "backend": "openai-chat", "model_id": "fake-model", "duration": 2.0,
        "completed": 3, "failed": 1, "total_input_tokens": 48, "total_output_tokens": 24, "request_throughput": 1.5,
        "request_goodput": None, "output_throughput": 12.0, "total_token_throughput": 36.0,
        "mean_ttft_ms": 52.0, "median_ttft_ms": 51.0, "std_ttft_ms": 1.0, "p99_ttft_ms": 55.0,
        "mean_tpot_ms": 10.0, "median_tpot_ms": 10.0, "std_tpot_ms": 0.1, "p99_tpot_ms": 10.5,
        "ttfts": [0.050, 0.052, 0.054, 0.0], "latencies": [0.120, 0.122, 0.124, 0.01],
        "output_lens": [8, 8, 8, 0], "errors": ["", "", "", "connection refused"]}
GUIDELLM = {"metadata": {}, "benchmarks": [{"start_time": 100.0, "end_time": 101.5, "duration": 1.5, "metrics": {
    "request_totals": {"successful": 40, "errored": 2, "incomplete": 0, "total": 42},
    "time_to_first_token_ms": {"successful": {"mean": 51.6, "median": 51.5, "std_dev": 0.5,
                                              "percentiles": {"p50": 51.5, "p90": 52.0, "p95": 52.2, "p99": 52.5}}},
    "inter_token_latency_ms": {"successful": {"mean": 9.97, "median": 9.96, "percentiles": {"p99": 10.2}}},
    "time_per_output_token_ms": {"successful": {"mean": 15.2, "median": 15.2}},
    "request_latency": {"successful": {"mean": 0.1219, "median": 0.1218, "percentiles": {"p99": 0.1237}}},
    "requests_per_second": {"successful": {"mean": 31.6}}, "output_tokens_per_second": {"successful": {"mean": 252.8}},
    "prompt_tokens_per_second": {"successful": {"mean": 626.5}}, "tokens_per_second": {"successful": {"mean": 879.3}},
    "output_token_count": {"successful": {"total_sum": 320.0}},
    "prompt_token_count": {"successful": {"total_sum": 793.0}},
}}]}
AIPERF = {"schema_version": "1", "start_time": "2026-11-26T02:15:27.064570", "end_time": "2026-11-26T02:15:28.346197",
          "request_count": {"unit": "requests", "avg": 40.0},
          "time_to_first_token": {"unit": "ms", "avg": 53.0, "p50": 52.4, "p90": 55.0, "p99": 58.0, "std": 1.7},
          "inter_token_latency": {"unit": "ms", "avg": 2.29, "p50": 2.28, "p99": 2.43},
          "inter_chunk_latency": {"unit": "ms", "avg": 10.1, "p50": 10.2, "p99": 12.8},
          "request_latency": {"unit": "ms", "avg": 124.0, "p50": 122.9, "p99": 129.8},
          "request_throughput": {"unit": "requests/sec", "avg": 31.2},
          "output_token_throughput": {"unit": "tokens/sec", "avg": 998.7},
          "benchmark_duration": {"unit": "sec", "avg": 1.28}, "total_output_tokens": {"unit": "tokens", "avg": 1280.0}}


def write(tmp_path, name: str, data: dict):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_vllm_bench_serve_with_its_per_request_lists(tmp_path):
    tool, results, latencies = read_peer(write(tmp_path, "vllm.json", VLLM))
    assert tool == "vllm bench serve" and (results.completed, results.failed) == (3, 1)
    assert results.latency("ttft", "median") == 51.0 and results.latency("ttft", "p50") == 51.0
    assert results.input_throughput == 24.0
    # The failed request is left out; E2E, absent from its percentile metrics, comes from the lists.
    assert list(latencies["ttft"]) == pytest.approx([50, 52, 54]) and list(latencies["tpot"]) == pytest.approx([10] * 3)
    assert results.latency("e2el", "mean") == pytest.approx(122.0)


def test_guidellms_inter_token_latency_is_loadwatchs_tpot_and_its_own_tpot_is_left_out(tmp_path):
    tool, results, latencies = read_peer(write(tmp_path, "benchmarks.json", GUIDELLM))
    assert tool == "GuideLLM" and latencies is None and (results.completed, results.failed) == (40, 2)
    assert results.latency("tpot", "mean") == 9.97 and results.latency("e2el", "p99") == pytest.approx(123.7)
    assert results.latency("ttft", "p90") == 52.0 and results.output_throughput == 252.8


def test_aiperfs_inter_chunk_latency_is_loadwatchs_itl(tmp_path):
    tool, results, _ = read_peer(write(tmp_path, "profile_export_aiperf.json", AIPERF))
    assert tool == "AIPerf" and results.completed == 40 and results.duration == 1.28
    assert (results.latency("tpot", "mean"), results.latency("itl", "median")) == (2.29, 10.2)


def test_compare_puts_them_beside_each_other_and_says_how_each_measures(tmp_path):
    paths = [write(tmp_path, "vllm.json", VLLM), write(tmp_path, "benchmarks.json", GUIDELLM),
             write(tmp_path, "aiperf.json", AIPERF)]
    text, rows = compare([load_side(f"{name}={path}") for name, path in zip(("vllm", "guidellm", "aiperf"), paths,
                                                                             strict=True)])
    assert "## guidellm against vllm" in text and "## aiperf against vllm" in text
    for tool in ("vllm bench serve", "GuideLLM", "AIPerf"):
        assert f"- **{tool}**:" in text
    with pytest.raises(NotAPeer):
        read_peer(write(tmp_path, "other.json", {"hello": 1}))
