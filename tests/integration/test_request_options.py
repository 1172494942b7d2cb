"""What --extra-body and --header ask for reaches the server with every request."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import get, locust_command

pytestmark = pytest.mark.timing  # judged to the millisecond: run alone, not beside other tests


def test_the_extra_body_and_headers_reach_the_server(fake_server, tmp_path):
    server = fake_server("--tokens", "4")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "1", "-r", "1", "--num-requests", "3", "--metrics-port",
                       "0", "--extra-body", '{"top_k": 5, "chat_template_kwargs": {"enable_thinking": false}}',
                       "--header", "X-Tenant: blue", "--header", "X-Trace: a,b",
                       "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    seen = json.loads(get(server.url + "/stats/last-request"))
    assert seen["body"]["top_k"] == 5 and seen["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert seen["body"]["stream"] is True  # loadwatch's own fields stand
    assert seen["headers"]["x-tenant"] == "blue" and seen["headers"]["x-trace"] == "a,b"
    assert seen["headers"]["accept"] == "text/event-stream"
    assert json.loads((tmp_path / "r.json").read_text())["options"]["header"] == ["X-Tenant: ***", "X-Trace: ***"]


def test_a_credential_header_is_refused_before_anything_is_sent(fake_server):
    server = fake_server("--tokens", "4")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "1", "-r", "1", "-t", "2s", "--metrics-port", "0",
                       "--header", "Authorization: Bearer sk-secret"),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode != 0 and "Authorization is not given on the command line" in run.stdout + run.stderr
    assert "sk-secret" not in run.stdout + run.stderr
    assert server.stats()["arrivals"] == 0


def test_a_traffic_split_asks_each_model_its_share_and_labels_by_it(fake_server, tmp_path):
    server = fake_server("--tokens", "2", "--ttft", "0.005", "--itl", "0.001", "--served", "base,lora-sql")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "4", "-r", "4", "--num-requests", "200",
                       "--metrics-port", "0", "--model", "base=0.75,lora-sql=0.25",
                       "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    asked = server.stats()["models"]
    assert set(asked) == {"base", "lora-sql"} and sum(asked.values()) == 200
    assert 0.6 < asked["base"] / 200 < 0.9  # a seeded draw of 200: its share, give or take
    scenarios = json.loads((tmp_path / "r.json").read_text())["scenarios"]
    assert {name: s["completed"] for name, s in scenarios.items()} == {
        "chat (base)": asked["base"], "chat (lora-sql)": asked["lora-sql"]}


def test_an_adapter_the_server_does_not_serve_stops_the_run_before_any_request(fake_server, tmp_path):
    server = fake_server("--tokens", "2", "--served", "base,lora-1")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "-t", "10s", "--metrics-port", "0",
                       "--model", "lora-1=1,lora-9=1"),
        capture_output=True, text=True, timeout=60,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 2, output
    assert f"{server.url} serves no model lora-9 (its /v1/models lists base, lora-1): check --model" in output
    assert "Traceback" not in output and server.stats()["arrivals"] == 0


def test_a_jsonl_lines_own_fields_reach_the_server_over_the_runs(fake_server, tmp_path):
    server = fake_server("--tokens", "2")
    dataset = tmp_path / "p.jsonl"
    dataset.write_text(json.dumps({"prompt": "list the services", "response_format": {"type": "json_object"},
                                   "top_k": 2, "tools": [{"type": "function", "function": {"name": "ls"}}]}) + "\n")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "1", "-r", "1", "--num-requests", "2", "--metrics-port",
                       "0", "--dataset", "jsonl", "--dataset-path", str(dataset), "--extra-body", '{"top_k": 9}'),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    body = json.loads(get(server.url + "/stats/last-request"))["body"]
    assert body["response_format"] == {"type": "json_object"} and body["tools"][0]["function"]["name"] == "ls"
    assert body["top_k"] == 2  # the line's own value over the run's


def test_a_reasoning_model_has_its_answer_timed_apart(fake_server, tmp_path):
    server = fake_server("--reasoning", "5", "--ttft", "0.1", "--itl", "0.02", "--tokens", "8",
                         "--cached-tokens", "3")
    run = subprocess.run(
        locust_command("-H", server.url, "--headless", "-u", "2", "-r", "2", "--num-requests", "10",
                       "--metrics-port", "0", "--results-json", str(tmp_path / "r.json")),
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    stats = server.stats()
    # TTFT ends at the first thought, the answer five tokens (100 ms) later.
    assert results["median_ttft_ms"] == pytest.approx(stats["median_ttft_ms"], abs=5)
    assert results["median_ttfa_ms"] == pytest.approx(stats["median_ttfa_ms"], abs=5)
    assert results["median_ttfa_ms"] - results["median_ttft_ms"] == pytest.approx(100, abs=10)
    assert results["total_reasoning_tokens"] == 10 * 5
    assert results["total_cached_tokens"] == 10 * 3
    assert 0 < results["cached_prompt_tokens_ratio"] < 1
    assert "Time to First Answer Token" in run.stdout + run.stderr
