import subprocess
import sys

import pytest
import yaml

from loadwatch import processes
from loadwatch.processes import ComponentError
from loadwatch.stack.config import render_alertmanager, render_prometheus
from loadwatch.stack.settings import StackSettings

needs_promtool = pytest.mark.needs("promtool")


@needs_promtool
def test_rendered_prometheus_config_has_this_runs_ports_and_passes_promtool(tmp_path):
    settings = StackSettings(home=tmp_path, scrape_interval="2s")
    path = render_prometheus(settings, tmp_path / "p", client="127.0.0.1:1111", exporter="127.0.0.1:2222",
                             vllm=["127.0.0.1:3333", "127.0.0.1:3334"], alertmanager="127.0.0.1:4444")
    config = yaml.safe_load(path.read_text())
    targets = {j["job_name"]: j["static_configs"][0]["targets"] for j in config["scrape_configs"]}
    assert targets == {"loadwatch-client": ["127.0.0.1:1111"], "loadwatch-engine": ["127.0.0.1:2222"],
                       "vllm": ["127.0.0.1:3333", "127.0.0.1:3334"]}, "a fleet's every replica scraped"
    assert config["global"]["scrape_interval"] == "2s"
    check = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
    # promtool read every rule of each file the config names (the count follows the generated rules).
    for rules in sorted((path.parent / "rules").glob("*.yml")):
        count = sum(len(group["rules"]) for group in yaml.safe_load(rules.read_text())["groups"])
        assert f"Checking {rules}\n  SUCCESS: {count} rules found" in check.stdout, check.stdout + check.stderr
    assert check.returncode == 0 and "SUCCESS: 2 rule files found" in check.stdout, check.stdout + check.stderr


@needs_promtool
def test_rendered_alertmanager_config_posts_to_the_given_webhook(tmp_path):
    path = render_alertmanager(StackSettings(home=tmp_path), tmp_path, "http://127.0.0.1:5555/hook")
    config = yaml.safe_load(path.read_text())
    assert config["receivers"][0]["webhook_configs"][0]["url"] == "http://127.0.0.1:5555/hook"
    assert subprocess.run(["amtool", "check-config", str(path)], capture_output=True).returncode == 0


def test_a_component_that_dies_at_start_is_reported_with_its_log(tmp_path):
    with pytest.raises(ComponentError, match="(?s)exited with code 3.*boom"):
        processes.start("broken", [sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
                         "http://127.0.0.1:9", "/", tmp_path / "broken.log", timeout=10)


def test_a_missing_program_is_named(tmp_path):
    with pytest.raises(ComponentError, match="no-such-binary is not installed"):
        processes.start("x", ["no-such-binary"], "http://127.0.0.1:9", "/", tmp_path / "x.log", timeout=1)


def test_down_without_a_stack_says_so(tmp_path, monkeypatch, capsys):
    from loadwatch import cli

    monkeypatch.setenv("LOADWATCH_STACK_HOME", str(tmp_path))
    assert cli.main(["down"]) == 0
    assert capsys.readouterr().out == "loadwatch: no stack was running\n"


def test_a_server_is_saved_as_soon_as_it_exists_and_awaited_until_it_answers(tmp_path):
    import json
    from dataclasses import asdict

    from tests.conftest import free_port

    port = free_port()
    state = tmp_path / "state.json"
    notes: list[float] = []
    server = [sys.executable, "-c", f"import time, http.server as h; time.sleep(1.5); "
                                    f"h.HTTPServer(('127.0.0.1', {port}), h.SimpleHTTPRequestHandler).serve_forever()"]
    component = processes.start("slow", server, f"http://127.0.0.1:{port}", "/", tmp_path / "slow.log", 30,
                                on_spawn=lambda c: processes.write_state(state, asdict(c)), on_wait=notes.append)
    try:
        assert json.loads(state.read_text())["pid"] == component.pid and component.alive()
        assert not notes  # ready within 10 s: no "still waiting"
    finally:
        processes.stop_group(component.pid, 5)
    assert not component.alive()


def test_a_start_interrupted_while_waiting_stops_what_it_started(tmp_path):
    spawned = []

    def interrupted(component):
        spawned.append(component)
        raise KeyboardInterrupt  # Ctrl-C, or SIGTERM turned into it by the CLI, during the wait

    never_ready = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(KeyboardInterrupt):
        processes.start("slow", never_ready, "http://127.0.0.1:9", "/", tmp_path / "slow.log", 30,
                        on_spawn=interrupted)
    assert spawned and not spawned[0].alive()


def test_a_started_server_gets_none_of_the_callers_secrets(tmp_path, monkeypatch):
    """Prometheus or the sidecar has no use for the API key, and /proc/PID/environ would show it."""
    from tests.conftest import free_port

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GRAFANA_TOKEN", "glsa_secret")
    monkeypatch.setenv("LOADWATCH_HARMLESS", "kept")
    port = free_port()
    server = [sys.executable, "-c", f"import http.server as h; h.HTTPServer(('127.0.0.1', {port}), "
                                    "h.SimpleHTTPRequestHandler).serve_forever()"]
    component = processes.start("env", server, f"http://127.0.0.1:{port}", "/", tmp_path / "env.log", 30,
                                env={"VLLM_API_KEY": "handed-on-purpose"})
    try:
        environ = dict(line.split("=", 1) for line in
                       open(f"/proc/{component.pid}/environ").read().split("\0") if "=" in line)
    finally:
        processes.stop_group(component.pid, 5)
    assert "OPENAI_API_KEY" not in environ and "GRAFANA_TOKEN" not in environ
    assert environ["LOADWATCH_HARMLESS"] == "kept" and environ["VLLM_API_KEY"] == "handed-on-purpose"


def test_a_port_another_process_answers_on_is_not_taken_for_the_servers_own(tmp_path):
    """Another process (another home's sidecar, restarted) took the port between its choice and the start:
    its 200 is not our server's readiness, or the run would measure and scrape that other one."""
    import re
    import time

    from tests.conftest import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    holder = subprocess.Popen([sys.executable, "-c", f"import http.server as h; h.HTTPServer(('127.0.0.1', {port}), "
                                                     "h.SimpleHTTPRequestHandler).serve_forever()"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 20
        while not processes.answers(url + "/"):
            assert time.monotonic() < deadline and holder.poll() is None, "the holder never answered"
            time.sleep(0.1)
        ours = [sys.executable, "-c", f"import time, http.server as h; time.sleep(30); h.HTTPServer(('127.0.0.1', "
                                      f"{port}), h.SimpleHTTPRequestHandler).serve_forever()"]
        spawned = []
        with pytest.raises(processes.PortTaken) as taken:
            processes.start("sidecar", ours, url, "/", tmp_path / "sidecar.log", 30, on_spawn=spawned.append)
    finally:
        holder.terminate()
        holder.wait(10)
    message = str(taken.value)
    assert re.fullmatch(rf"sidecar: port {port} is held by another process, pid {holder.pid} \(.*http\.server.*\), "
                        r"which answered in its place; stop that process, or start it again on another port", message)
    assert "\n" not in message and "Traceback" not in message
    assert not spawned[0].alive(), "the server that could not have its port is stopped"


@pytest.mark.needs("prometheus")
@pytest.mark.needs("prometheus-alertmanager")
def test_up_whose_sidecar_port_was_taken_after_its_choice_stops_in_one_line(tmp_path, monkeypatch, fake_server):
    """The moment no choice can close, between the last check of a port and its server's bind: another
    home's sidecar bound 9647 there. `up` stops, saying so, and leaves nothing of its own running."""
    import re

    from loadwatch.defaults import Part
    from loadwatch.stack import stack as stack_module
    from tests.conftest import free_port

    target = fake_server().url
    port = free_port()
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "metrics").write_text("vllm:num_requests_running 0\n")  # its /metrics answers 200
    holder = subprocess.Popen([sys.executable, "-c", f"import http.server as h; h.HTTPServer(('127.0.0.1', {port}), "
                                                     "h.SimpleHTTPRequestHandler).serve_forever()"],
                              cwd=tmp_path / "held")
    choose = stack_module._choose_ports
    monkeypatch.setattr(stack_module, "_choose_ports", lambda *args: {**choose(*args), Part.EXPORTER: port})
    monkeypatch.setattr(stack_module, "_choose_again", lambda stack, settings: None)  # taken just after it
    settings = StackSettings(home=tmp_path / "home", free_ports=True, start_timeout=30)
    try:
        while not processes.answers(f"http://127.0.0.1:{port}/"):
            assert holder.poll() is None
        with pytest.raises(stack_module.StackError) as refused:
            stack_module.up(settings, tmp_path / "run", target=target, say=lambda _: None)
    finally:
        holder.terminate()
        holder.wait(10)
    message = str(refused.value)
    assert re.match(rf"exporter: port {port} is held by another process, pid {holder.pid} \(.*http\.server.*\), "
                    r"which answered in its place; stop that process, or start the stack again", message), message
    assert "LOADWATCH_STACK_FREE_PORTS=true" in message and "\n" not in message
    assert not (tmp_path / "run" / "stack.json").exists() and not stack_module.running_stacks(settings)
