"""`loadwatch up` against a server, as a user runs it: every part listens on 127.0.0.1 only, the
target's credentials are in none of its files or logs, Prometheus' lifecycle API is off, and an
alert reaches the alert log of the run when no webhook is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from tests.conftest import wait_for

pytestmark = [pytest.mark.needs("prometheus"), pytest.mark.needs("prometheus-alertmanager")]
SENTINEL = "pw-sentinel-3e1f"


def post(url: str, body: bytes | None = None, content_type: str = "application/json") -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_native_stack_is_loopback_only_keeps_no_credentials_and_logs_alerts(fake_server, tmp_path):
    server = fake_server()
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(tmp_path / "home"), "LOADWATCH_STACK_GROUP_WAIT": "1s"}
    cli = [sys.executable, "-m", "loadwatch.cli"]
    target = f"http://loadwatch:{SENTINEL}@127.0.0.1:{server.port}"
    up = subprocess.run([*cli, "up", "--target", target, "--out", str(tmp_path / "runs"), "--metrics-port", "0"],
                        capture_output=True, text=True, timeout=120, env=env)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        stack = json.loads(next((tmp_path / "runs").glob("*/stack.json")).read_text())
        components = {c["name"]: c for c in stack["components"]}
        assert set(components) == {"exporter", "alert-log", "alertmanager", "prometheus"}
        listening = {name: {c.laddr.ip for c in psutil.Process(c_["pid"]).net_connections(kind="inet")
                            if c.status == psutil.CONN_LISTEN} for name, c_ in components.items()}
        quit_status = post(components["prometheus"]["url"] + "/-/quit")
        now = datetime.now(UTC)
        alert = [{"labels": {"alertname": "LoadwatchTestAlert", "severity": "warning", "target": "vllm"},
                  "annotations": {"summary": "a test alert"}, "startsAt": now.isoformat(),
                  "endsAt": (now + timedelta(minutes=5)).isoformat()}]
        assert post(components["alertmanager"]["url"] + "/api/v2/alerts", json.dumps(alert).encode()) == 200
        alert_log = Path(components["alert-log"]["log"])
        wait_for(lambda: "FIRING LoadwatchTestAlert [warning] target=vllm: a test alert" in alert_log.read_text(),
                 30, "the alert in the alert log")
    finally:
        down = subprocess.run([*cli, "down"], capture_output=True, text=True, timeout=60, env=env)
    assert down.returncode == 0, down.stdout + down.stderr
    assert all(ips == {"127.0.0.1"} for ips in listening.values()), listening
    assert quit_status == 403  # the lifecycle API is off: nobody can stop Prometheus over HTTP
    files = [p for p in tmp_path.rglob("*") if p.is_file() and "prometheus-data" not in p.parts]
    assert files and not [p for p in files if SENTINEL.encode() in p.read_bytes()]
    assert SENTINEL not in up.stdout + up.stderr + down.stdout
