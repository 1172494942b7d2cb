"""What --extra-body and --header ask for reaches the server with every request."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import get, locust_command

pytestmark = pytest.mark.integration


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
