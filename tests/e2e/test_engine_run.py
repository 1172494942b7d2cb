"""Against the real embedded vLLM: the client's counts, the engine's, and the sidecar's view."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadwatch.settings import records_beside
from tests.conftest import REPO, embedded_engine, scrape, total, wait_for
from tests.e2e.exporter_watch import ExporterWatch


@pytest.fixture(scope="module")
def engine():
    with embedded_engine() as info:
        yield info


@pytest.fixture
def watch(engine):
    watcher = ExporterWatch(engine.url)
    yield watcher
    watcher.close()


def engine_figures(url: str) -> dict[str, float]:
    samples = scrape(url + "/metrics")
    return {
        "success": total(samples, "vllm:request_success_total"),
        "ttft_sum": total(samples, "vllm:time_to_first_token_seconds_sum"),
        "ttft_count": total(samples, "vllm:time_to_first_token_seconds_count"),
        "generation": total(samples, "vllm:generation_tokens_total"),
    }


def headless(url: str, results: Path, *args: str, locustfile: Path = REPO / "locustfiles" / "chat.py"):
    return subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(locustfile), "-H", url, "--headless", "--metrics-port", "0",
         "--stop-timeout", "60", "--results-json", str(results), *args],
        capture_output=True, text=True, timeout=240,
    )


def test_distributed_run_counts_what_the_engine_served_and_the_sidecar_saw_it(engine, watch, tmp_path):
    before = engine_figures(engine.url)
    tokens_before = watch.now("loadwatch_engine_generation_tokens_total")
    results = tmp_path / "results.json"
    run = headless(engine.url, results, "-u", "8", "-r", "8", "-t", "15s", "--processes", "2",
                   "--max-tokens", "64")
    data = json.loads(results.read_text())
    assert data["completed"] > 20, run.stdout + run.stderr
    finished = data["completed"] + data["failed"]
    # vLLM may count a request a moment after its last chunk went out: let its counter settle.
    wait_for(lambda: engine_figures(engine.url)["success"] - before["success"] >= finished, 5,
             "the engine's success counter to take in the last requests")
    after = engine_figures(engine.url)
    # Every request the engine finished was counted once by the client, and no other.
    assert finished == after["success"] - before["success"], run.stderr[-4000:]
    assert set(data["failures"]) <= {"empty_completion"}, data["failures"]
    # The engine also counts the tokens of empty completions (an EOS alone), which failed here.
    untold = after["generation"] - before["generation"] - data["total_output_tokens"]
    assert 0 <= untold <= data["failed"] * 64
    engine_ttft_ms = 1000 * (after["ttft_sum"] - before["ttft_sum"]) / (after["ttft_count"] - before["ttft_count"])
    assert data["mean_ttft_ms"] >= engine_ttft_ms
    assert list(data["scenarios"]) == ["chat (tiny)"]
    # Each request joined with the engine's own account of it, by the X-Request-Id the client sent;
    # both are monotonic intervals, so the engine's queue and prefill fit inside the client's TTFT.
    served = [r for r in (json.loads(line) for line in records_beside(results).read_text().splitlines())
              if r["failure"] is None and r["stage"] != "warmup"]
    assert served and all(r["engine_prefill_s"] > 0 and r["engine_queue_s"] >= 0 for r in served)
    # Within twice README's clock tolerance of 1 ms: this checks the join, not the clocks.
    overshoot = max(served, key=lambda r: r["engine_queue_s"] + r["engine_prefill_s"] - r["ttft_s"])
    assert overshoot["engine_queue_s"] + overshoot["engine_prefill_s"] <= overshoot["ttft_s"] + 0.002, overshoot

    assert watch.peaks["loadwatch_engine_requests_running"] > 0
    # The sidecar samples every 0.5 s: give it a sample or two to catch up with the engine.
    served = after["generation"] - before["generation"]
    wait_for(lambda: watch.now("loadwatch_engine_generation_tokens_total") - tokens_before == served, 5,
             "the sidecar's token counter to move by what the engine generated")


def test_shared_prefix_workload_shows_prefix_cache_hits(engine, watch, tmp_path):
    run = headless(engine.url, tmp_path / "r.json", "-u", "4", "-r", "4", "-t", "15s", "--max-tokens", "16",
                   locustfile=Path(__file__).parent / "locustfiles" / "shared_prefix.py")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["completed"] > 10 and set(data["failures"]) <= {"empty_completion"}, run.stdout + run.stderr
    assert watch.peaks["loadwatch_engine_prefix_cache_hit_ratio"] > 0.5


def test_random_prompts_have_the_asked_token_length_by_the_engines_tokenizer(engine):
    from loadwatch.client.stream import Streamer
    from loadwatch.settings import LoadSettings
    from loadwatch.workloads.datasets import build
    from loadwatch.workloads.tokens import ServerTokenizer, tokenizer_for

    streamer = Streamer(engine.url, None, 30.0, LoadSettings().max_line_bytes)
    tokenizer = tokenizer_for(streamer, "tiny")
    assert isinstance(tokenizer, ServerTokenizer)
    exact = build(LoadSettings(dataset="random", input_len=100, output_len=8, dataset_size=10), tokenizer)
    assert [tokenizer.count(exact().text) for _ in range(10)] == [100] * 10
    ranged = build(LoadSettings(dataset="random", input_len=100, range_ratio=0.25, dataset_size=20), tokenizer)
    lengths = [tokenizer.count(ranged().text) for _ in range(20)]
    assert all(75 <= n <= 125 for n in lengths) and len(set(lengths)) > 1
    streamer.close()


@pytest.mark.parametrize("dataset", [
    ["--dataset", "builtin"], ["--dataset", "sharegpt"], ["--dataset", "random"], ["--dataset", "prefix-repetition"],
    ["--dataset", "agent", "--agent-prefix", "static"], ["--dataset", "agent", "--agent-prefix", "dynamic"],
    ["--dataset", "jsonl"], ["--dataset", "sessions"], ["--dataset", "trace", "--speedup", "8"],
], ids=lambda args: "-".join(args[1::2]))
def test_every_shipped_dataset_fits_the_embedded_engine(engine, tmp_path, dataset):
    # Before, the agent session's 2,049 prompt tokens met --max-model-len 2048: every request a 400.
    results = tmp_path / "results.json"
    run = headless(engine.url, results, "-u", "3", "-r", "3", "--num-requests", "3", "--max-tokens", "16",
                   "--output-len", "16", "--ignore-eos", *dataset)  # no EOS first: see the trace's test
    data = json.loads(results.read_text())
    assert run.returncode == 0 and (data["completed"], data["failed"]) == (3, 0), run.stderr[-2000:]


NAMED_TOOL = {"tool_choice": {"type": "function", "function": {"name": "query_metrics"}}}


def test_sessions_hit_the_prefix_cache_turn_after_turn_as_the_engine_counts(engine, tmp_path):
    before = scrape(engine.url + "/metrics")
    results = tmp_path / "results.json"
    # A named tool_choice: vLLM's structured output makes the random weights call the tool, every turn.
    run = headless(engine.url, results, "-u", "3", "-r", "3", "--num-requests", "24", "--dataset", "sessions",
                   "--turns", "4", "--max-tokens", "16", "--system-len", "128", "--turn-len", "32",
                   "--extra-body", json.dumps(NAMED_TOOL))
    data = json.loads(results.read_text())
    assert run.returncode == 0 and (data["completed"], data["failed"]) == (24, 0), run.stderr[-2000:]
    assert data["total_tool_calls"] == 24  # tool-only streams, each a success
    after = scrape(engine.url + "/metrics")
    hits = total(after, "vllm:prefix_cache_hits_total") - total(before, "vllm:prefix_cache_hits_total")
    assert data["total_cached_tokens"] == hits > 0  # what each usage said is what the engine counted
    report = subprocess.run([sys.executable, "-m", "loadwatch.cli", "report", str(results)],
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    turns = {row["turn"]: row for row in json.loads((tmp_path / "report.json").read_text())["turns"]}
    assert list(turns) == ["1", "2", "3-4"] and sum(t["completed"] for t in turns.values()) == 24
    # The history grows turn after turn, and the cache keeps it: later turns find most of their prompt there.
    assert turns["1"]["mean_prompt_tokens"] < turns["2"]["mean_prompt_tokens"] < turns["3-4"]["mean_prompt_tokens"]
    assert turns["3-4"]["cached_prompt_tokens_ratio"] > 0.7
    assert all(t["median_ttft_ms"] > 0 and t["tool_calls"] == t["completed"] for t in turns.values())
    assert "## Sessions, turn by turn" in (tmp_path / "report.md").read_text()


def test_the_sample_trace_replays_once_with_its_shared_blocks_cached(engine, tmp_path):
    results = tmp_path / "results.json"
    # --ignore-eos: the random weights draw EOS first about one request in 1,538 (its vocabulary), and
    # a request that carries no text is an empty_completion, which failed one run of 40 requests.
    run = headless(engine.url, results, "-u", "1", "-r", "1", "--dataset", "trace", "--speedup", "4", "--ignore-eos")
    data = json.loads(results.read_text())
    assert run.returncode == 0 and (data["completed"], data["failed"]) == (40, 0), run.stderr[-2000:]
    # Entries that share hash ids share prompt blocks: three in four prompt tokens come from the cache.
    assert data["cached_prompt_tokens_ratio"] > 0.5
    # From the first send to the last answer: the trace's last entry is sent at 19.8 s / 4, on time
    # however slow the machine, and answered within about the slowest request's time.
    last_sent = 19.818 / 4
    assert last_sent - 0.1 <= data["duration"] <= last_sent + data["p99_e2el_ms"] / 1000 + 1.0, data


def test_a_workload_over_the_context_stops_before_sending_with_a_clear_message(engine, tmp_path):
    before = engine_figures(engine.url)
    run = headless(engine.url, tmp_path / "results.json", "-u", "2", "-r", "2", "-t", "20s",
                   "--dataset", "agent", "--output-len", "3000")
    assert run.returncode == 2, run.stderr[-2000:]
    assert "the agent workload cannot fit the server's context" in run.stderr
    assert "max_model_len of 4096" in run.stderr and "Traceback" not in run.stderr
    assert engine_figures(engine.url)["success"] == before["success"]
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["completed"] + data["failed"] == 0  # not one refused request sent


def assert_endpoint_refused(url: str, tmp_path: Path, endpoint: str, path: str) -> None:
    """vLLM serves only its runner's APIs: another's is a 404, which ends the run with one line."""
    run = headless(url, tmp_path / "results.json", "-u", "1", "-r", "1", "--num-requests", "3",
                   "--endpoint", endpoint)
    output = run.stdout + run.stderr
    assert run.returncode == 2 and "Traceback" not in output, output[-3000:]
    assert f"{path} answered 404" in output and "check --endpoint and --model" in output, output[-3000:]


def test_embeddings_on_a_generating_model_is_one_line_and_no_run(engine, tmp_path):
    assert_endpoint_refused(engine.url, tmp_path, "embeddings", "/v1/embeddings")


def test_the_responses_api_is_timed_as_chat_and_counts_what_the_engine_served(engine, tmp_path):
    """vLLM's /v1/responses, streamed: TTFT at the first output-text delta, the tokens and the engine's
    account from the completed event; a session's history is its whole input, turn after turn."""
    before = engine_figures(engine.url)
    results = tmp_path / "results.json"
    run = headless(engine.url, results, "-u", "2", "-r", "2", "--num-requests", "12", "--endpoint", "responses",
                   "--dataset", "sessions", "--turns", "3", "--max-tokens", "16", "--ignore-eos",
                   "--system-len", "64", "--turn-len", "16")
    data = json.loads(results.read_text())
    assert run.returncode == 0 and (data["completed"], data["failed"]) == (12, 0), run.stderr[-2000:]
    wait_for(lambda: engine_figures(engine.url)["success"] - before["success"] >= 12, 5,
             "the engine's success counter to take in the last requests")
    after = engine_figures(engine.url)
    assert after["success"] - before["success"] == 12
    assert data["total_output_tokens"] == after["generation"] - before["generation"] == 12 * 16
    assert data["output_tokens_counted_by"] == {"usage": 12} and data["median_ttft_ms"] > 0
    served = [json.loads(line) for line in records_beside(results).read_text().splitlines()]
    assert all(r["engine_prefill_s"] > 0 for r in served if r["stage"] != "warmup")  # the account came too
    turns = sorted((r["turn"], r["prompt_tokens"]) for r in served)
    assert turns[0][0] == 1 and turns[-1][0] == 3 and turns[-1][1] > turns[0][1]  # the input grew with the answers


def test_requests_the_client_hangs_up_on_are_what_the_engine_aborted(engine, tmp_path):
    """vLLM 0.32 counts no abort in request_success_total{finished_reason="abort"}: a request it
    aborts is one that got its first token (time_to_first_token_seconds_count) and never finished."""
    before, results = engine_figures(engine.url), tmp_path / "results.json"
    run = headless(engine.url, results, "-u", "2", "-r", "2", "--num-requests", "20", "--max-tokens", "64",
                   "--ignore-eos", "--cancel-ratio", "0.5", "--cancel-after-tokens", "4")
    data = json.loads(results.read_text())
    assert run.returncode == 0 and data["failed"] == 0 and data["completed"] + data["cancelled"] == 20, run.stderr
    assert data["cancelled"] > 0 and data["total_output_tokens"] == data["completed"] * 64

    def engine_idle() -> bool:
        samples = scrape(engine.url + "/metrics")
        return total(samples, "vllm:num_requests_running") == 0 and total(samples, "vllm:kv_cache_usage_perc") == 0

    wait_for(engine_idle, 10, "the engine to drop the requests hung up on and free their KV cache")
    after = engine_figures(engine.url)
    started, finished = after["ttft_count"] - before["ttft_count"], after["success"] - before["success"]
    assert (finished, started - finished) == (data["completed"], data["cancelled"])
    # Each aborted request stopped generating soon after its fourth token, far short of 64.
    cut_short = after["generation"] - before["generation"] - data["total_output_tokens"]
    assert data["cancelled"] * 4 <= cut_short < data["cancelled"] * 32
