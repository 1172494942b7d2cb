"""A sentinel key reaches the server's Authorization header and nothing else: not the web UI, the
options a worker receives, `ps`, the results, the logs or /metrics; what Locust and loadwatch
open listens on loopback unless asked; the web UI sets the load, never a path or a credential."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import psutil

from tests.conftest import REPO, finish, free_port, get, locust_command, scrape, total, wait_for

SENTINEL = "sk-sentinel-5f3a9c71"


def post_form(url: str, fields: dict) -> tuple[int, dict]:
    data = urllib.parse.urlencode(fields).encode()
    try:
        with urllib.request.urlopen(url, data=data, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def listening(pid: int) -> set[str]:
    return {c.laddr.ip for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}


def command_lines(pid: int) -> str:
    parent = psutil.Process(pid)
    return " ".join(" ".join(p.cmdline()) for p in [parent, *parent.children(recursive=True)])


def test_the_key_reaches_the_server_and_nothing_else(fake_server, tmp_path):
    server = fake_server("--ttft", "0.01", "--itl", "0.005", "--tokens", "5", "--authorization", f"Bearer {SENTINEL}")
    web, metrics, master_port = free_port(), free_port(), free_port()
    results, dump, stray = tmp_path / "results.json", tmp_path / "rogue.json", tmp_path / "new-dir" / "r.json"
    with_key = {**os.environ, "OPENAI_API_KEY": SENTINEL}
    started = [subprocess.Popen(
        locust_command("-H", server.url, "--master", "--master-bind-port", str(master_port), "--web-port", str(web),
                       "--metrics-port", str(metrics), "--results-json", str(results)),
        env=with_key, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)]
    started.append(subprocess.Popen(locust_command("--worker", "--master-port", str(master_port)), env=with_key,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    # A stranger's worker: no key of its own; it keeps what the master sends. Its locustfile bears the
    # master's name, as a master sends away a worker of another locustfile.
    stranger = tmp_path / "stranger" / "chat.py"
    stranger.parent.mkdir()
    stranger.write_text((REPO / "locustfiles" / "chat.py").read_text()
                        + (REPO / "tests" / "integration" / "locustfiles" / "rogue.py").read_text())
    started.append(subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(stranger), "--worker", "--master-port", str(master_port)],
        env={k: v for k, v in {**os.environ, "ROGUE_DUMP": str(dump)}.items() if k != "OPENAI_API_KEY"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    ui = f"http://127.0.0.1:{web}"
    try:
        wait_for(lambda: json.loads(get(ui + "/stats/requests"))["worker_count"] == 2, 90, "two workers")
        page = get(ui + "/").decode()
        refused_path = post_form(ui + "/swarm", {"user_count": 2, "spawn_rate": 2, "results_json": str(stray)})
        refused_host = post_form(ui + "/swarm", {"user_count": 2, "spawn_rate": 2,
                                                 "host": f"http://u:{SENTINEL}@127.0.0.1:{server.port}"})
        started_run = post_form(ui + "/swarm", {"user_count": 2, "spawn_rate": 2, "host": server.url})
        wait_for(lambda: total(scrape(f"http://127.0.0.1:{metrics}/metrics"),
                               "loadwatch_client_requests_total") >= 10, 30, "requests")
        metric_pages = get(f"http://127.0.0.1:{metrics}/metrics").decode() + get(ui + "/metrics").decode()
        argv = command_lines(started[0].pid) + command_lines(started[1].pid)
        master_listens = listening(started[0].pid)
        urllib.request.urlopen(urllib.request.Request(ui + "/stop", method="POST"), timeout=10).read()
        wait_for(lambda: json.loads(get(ui + "/stats/requests"))["state"] == "stopped", 30, "the stop")
    finally:
        outputs = [finish(p) for p in started]
    everything = "\n".join([page, metric_pages, argv, *outputs, results.read_text(), dump.read_text()])

    assert started_run == (200, started_run[1]) and started_run[1]["success"], started_run
    assert SENTINEL not in everything
    assert server.stats()["outcomes"].keys() == {"completed"}, server.stats()
    data = json.loads(results.read_text())
    assert data["completed"] >= 10 and data["failed"] == 0
    received = json.loads(dump.read_text())
    assert received["host"] == server.url and received["options"]["api_key"] is None
    assert refused_path[0] == 400 and "results_json" in refused_path[1]["message"]
    assert not stray.parent.exists()
    assert refused_host[0] == 400 and "OPENAI_API_KEY" in refused_host[1]["message"]
    assert master_listens == {"127.0.0.1"}, master_listens  # web UI, metrics and the workers' port
    assert "Traceback" not in "\n".join(outputs)


def test_url_credentials_are_sent_as_basic_auth_and_shown_nowhere(fake_server, tmp_path):
    basic = "Basic " + base64.b64encode(f"loadwatch:{SENTINEL}".encode()).decode()
    server = fake_server("--ttft", "0.01", "--itl", "0.005", "--tokens", "5", "--authorization", basic)
    metrics, results = free_port(), tmp_path / "results.json"
    run = subprocess.Popen(
        locust_command("--headless", "-u", "2", "-r", "2", "-t", "4s", "--metrics-port", str(metrics),
                       "--results-json", str(results)),
        env={**os.environ, "LOCUST_HOST": f"http://loadwatch:{SENTINEL}@127.0.0.1:{server.port}/v1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        page = wait_for(lambda: get(f"http://127.0.0.1:{metrics}/metrics").decode(), 20, "the metrics")
        labels = wait_for(lambda: [ls for (n, ls) in scrape(f"http://127.0.0.1:{metrics}/metrics")
                                   if n == "loadwatch_run_info"], 20, "run_info")
    finally:
        output = finish(run, exit_within=30)
    assert run.returncode == 0, output
    assert SENTINEL not in page + output + results.read_text()
    data = json.loads(results.read_text())
    assert data["completed"] > 0 and data["failed"] == 0
    assert data["target"] == f"http://127.0.0.1:{server.port}/v1"
    assert ("target", f"http://127.0.0.1:{server.port}/v1") in labels[0]


def test_a_key_on_the_command_line_is_refused_without_being_echoed():
    run = subprocess.run(locust_command("--headless", "-H", "http://127.0.0.1:1", "--api-key", SENTINEL),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--api-key is refused" in run.stderr and "OPENAI_API_KEY" in run.stderr
    assert SENTINEL not in run.stdout + run.stderr


def test_an_unreadable_key_file_stops_the_run_with_its_name(tmp_path):
    missing = tmp_path / "no-such-key"
    run = subprocess.run(locust_command("--headless", "-H", "http://127.0.0.1:1", "--api-key-file", str(missing),
                                        "--metrics-port", "0"),
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"cannot read the OPENAI_API_KEY file {missing}" in run.stderr
    assert "Traceback" not in run.stdout + run.stderr


def test_web_login_guards_the_ui_and_its_metrics(fake_server):
    server = fake_server()
    web = free_port()
    env = {**os.environ, "LOADWATCH_WEB_PASSWORD": SENTINEL}
    locust = subprocess.Popen(locust_command("-H", server.url, "--web-login", "--web-port", str(web),
                                             "--metrics-port", "0"),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ui = f"http://127.0.0.1:{web}"
    try:
        wait_for(lambda: get(ui + "/login"), 30, "the login page")
        anonymous = urllib.request.urlopen(ui + "/metrics", timeout=5)
        jar = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        wrong = jar.open(ui + "/login_submit", urllib.parse.urlencode(
            {"username": "loadwatch", "password": "wrong"}).encode(), timeout=5)
        wrong_then = jar.open(ui + "/metrics", timeout=5)
        jar.open(ui + "/login_submit", urllib.parse.urlencode(
            {"username": "loadwatch", "password": SENTINEL}).encode(), timeout=5)
        signed_in = jar.open(ui + "/metrics", timeout=5).read().decode()
    finally:
        output = finish(locust)
    assert anonymous.url.startswith(ui + "/login") and wrong_then.url.startswith(ui + "/login")
    assert wrong.url.startswith(ui + "/login")
    assert "loadwatch_client_users" in signed_in
    assert SENTINEL not in output


def test_web_login_without_a_password_is_a_clear_error(fake_server):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADWATCH_WEB_")}
    run = subprocess.run(locust_command("-H", fake_server().url, "--web-login", "--web-port", str(free_port()),
                                        "--metrics-port", "0"),
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "--web-login needs a password: set $LOADWATCH_WEB_PASSWORD" in run.stderr
