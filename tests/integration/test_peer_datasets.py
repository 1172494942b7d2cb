"""Datasets in the peers' formats, as a user runs them (issue 41): GuideLLM's counts reach the server
as max_tokens and not as body fields, AIPerf's sessions run as sessions, and a ShareGPT file of first
turns only is served with --sharegpt-output-len."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, get, headless_run

REAL = REPO.parent / "shared" / "real"


def test_a_guidellm_file_sends_its_prompts_with_their_output_counts_as_max_tokens(fake_server, tmp_path):
    server = fake_server("--ttft", "0.01", "--itl", "0.001", "--tokens", "3")
    path = tmp_path / "guidellm.jsonl"
    path.write_text(json.dumps({"prompt": "Hello, how are you?", "output_tokens_count": 7, "additional_column": "x"})
                    + "\n")
    run = headless_run(server.url, tmp_path / "r.json", "-u", "1", "-r", "1", "--num-requests", "3", "--dataset",
                       "jsonl", "--dataset-path", str(path))
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"dataset {path} read as GuideLLM's" in run.stderr
    body = json.loads(get(server.url + "/stats/last-request"))["body"]
    assert body["max_tokens"] == 7 and "output_tokens_count" not in body and "additional_column" not in body


def test_aiperf_multi_turn_sessions_run_turn_by_turn(fake_server, tmp_path):
    server = fake_server("--ttft", "0.01", "--itl", "0.001", "--tokens", "3")
    path = tmp_path / "multi.jsonl"
    path.write_text("".join(json.dumps({"session_id": f"s{i}", "turns": [{"text": f"Hello {i}"},
                                                                         {"text": "And then?", "delay": 0}]}) + "\n"
                            for i in range(3)))
    run = headless_run(server.url, tmp_path / "r.json", "-u", "1", "-r", "1", "--num-requests", "4", "--dataset",
                       "sessions", "--dataset-path", str(path), "--endpoint", "chat")
    assert run.returncode == 0, run.stderr[-2000:]
    messages = json.loads(get(server.url + "/stats/last-request"))["body"]["messages"]
    # The second turn carries the first, and the model's answer to it.
    assert [m["role"] for m in messages][-3:] == ["user", "assistant", "user"]
    assert messages[-1]["content"] == "And then?"


@pytest.mark.skipif(not (REAL / "sharegpt-v3-filtered-500-first-turn-ml-energy.json").exists(),
                    reason=f"{REAL} is absent: others' datasets are read in place, never copied here")
def test_a_sharegpt_file_of_first_turns_only_serves_with_an_output_length(fake_server, tmp_path):
    server = fake_server("--ttft", "0.01", "--itl", "0.001", "--tokens", "3")
    path = REAL / "sharegpt-v3-filtered-500-first-turn-ml-energy.json"
    refused = headless_run(server.url, tmp_path / "a.json", "--num-requests", "5", "--dataset", "sharegpt",
                           "--dataset-path", str(path))
    assert refused.returncode == 2 and "with --sharegpt-output-len N its first human turns are sent" in refused.stderr
    run = headless_run(server.url, tmp_path / "r.json", "-u", "2", "-r", "2", "--num-requests", "20", "--dataset",
                       "sharegpt", "--dataset-path", str(path), "--sharegpt-output-len", "64")
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads((tmp_path / "r.json").read_text())["completed"] == server.stats()["arrivals"] == 20
    assert json.loads(get(server.url + "/stats/last-request"))["body"]["max_tokens"] == 64
