"""Which stacks run on this load host, and the one refusal: a second embedded engine."""

from __future__ import annotations

import os

import pytest

from loadwatch.fleet.servers import HERE, USER, Servers
from loadwatch.processes import write_state
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import STATE, Stack, StackError, WhichStack, _entry, down, running_stacks, up


def started(settings: StackSettings, run_dir, engine: bool, owner: int) -> None:
    """A stack's files as `up` leaves them, its owner the given process."""
    servers = Servers.engine("http://127.0.0.1:8000", HERE if engine else USER, home_engine=engine)
    Stack(str(run_dir), 0, servers, owner=owner).save(run_dir / STATE)
    write_state(_entry(settings, run_dir), {"run_dir": str(run_dir)})


def test_a_second_embedded_engine_is_refused_in_one_line_naming_the_first(tmp_path):
    settings = StackSettings(home=tmp_path / "home")
    started(settings, tmp_path / "first", engine=True, owner=os.getpid())
    with pytest.raises(StackError) as refused:
        up(settings, tmp_path / "second")
    message = str(refused.value)
    assert "\n" not in message and str(tmp_path / "first") in message and "share this machine's cores" in message
    assert not (tmp_path / "second").exists(), "nothing of the refused stack is made"


def test_stacks_whose_owner_and_parts_are_gone_are_forgotten(tmp_path):
    settings = StackSettings(home=tmp_path / "home")
    gone = 2**22 + 12345  # above any pid this kernel hands out
    started(settings, tmp_path / "old", engine=True, owner=gone)
    started(settings, tmp_path / "live", engine=False, owner=os.getpid())
    assert [s.run_dir for s in running_stacks(settings)] == [str(tmp_path / "live")]
    assert len(list(settings.stacks_dir.glob("*.json"))) == 1


def test_down_without_a_folder_names_each_of_several_and_stops_none(tmp_path):
    settings = StackSettings(home=tmp_path / "home")
    for name in ("a", "b"):
        started(settings, tmp_path / name, engine=False, owner=os.getpid())
    with pytest.raises(WhichStack) as which:
        down(settings)
    assert f"loadwatch down {tmp_path / 'a'}" in str(which.value) and f"loadwatch down {tmp_path / 'b'}" in str(
        which.value)
    assert len(running_stacks(settings)) == 2


def test_a_fleets_stack_that_fails_to_start_stops_no_engine_of_anothers(tmp_path, monkeypatch):
    """A CI run: a fleet refused for its policy stopped the embedded engine another run was loading
    (engine.json is the home's one engine, whoever started it). Only a stack's own engine is stopped."""
    from loadwatch.engine import process as engine
    from loadwatch.fleet.options import FleetOptions
    from loadwatch.fleet.routers import RouterError
    from loadwatch.stack import stack as stack_module

    stopped = []
    monkeypatch.setattr(engine, "stop", lambda settings, grace=30.0: stopped.append("engine"))

    def refuse(*_args, **_kwargs):
        raise RouterError("vllm-router refused it")

    monkeypatch.setattr(stack_module, "start_fleet", refuse)
    settings = StackSettings(home=tmp_path / "home")
    with pytest.raises(RouterError):
        up(settings, tmp_path / "fleet", fleet=FleetOptions(replicas=2))
    assert stopped == [] and not (tmp_path / "fleet" / STATE).exists()

    old = tmp_path / "old" / STATE  # a state file of before fleets
    write_state(old, {"run_dir": str(old.parent), "target": "http://127.0.0.1:8000", "client_port": 0,
                      "engine_started": True, "components": [], "owner": 1, "ports": {}})
    stack = Stack.load(old)
    assert stack is not None
    stack_module._stop(stack, object())  # type: ignore[arg-type]
    assert stopped == ["engine"], "a stack of before fleets started its embedded engine itself"


def test_an_embedded_fleets_port_taken_is_the_stacks_failure_in_one_line(tmp_path, monkeypatch):
    """The router's port is chosen before the replicas load (minutes): another process that binds it
    meanwhile fails the start as the stack's (StackError, which tune starts again), not as the
    configuration's, and names the stack's remedy."""
    from loadwatch.fleet.options import FleetOptions
    from loadwatch.processes import PortTaken
    from loadwatch.stack import stack as stack_module

    def taken(*_args, **_kwargs):
        raise PortTaken("router", 30123, "pid 42 (python -m http.server)")

    monkeypatch.setattr(stack_module, "start_fleet", taken)
    settings = StackSettings(home=tmp_path / "home")
    with pytest.raises(StackError) as failed:
        up(settings, tmp_path / "fleet", fleet=FleetOptions(replicas=2))
    message = str(failed.value)
    assert "\n" not in message and "port 30123" in message and "LOADWATCH_STACK_FREE_PORTS" in message
    assert not (tmp_path / "fleet" / STATE).exists()


def test_a_port_bound_since_it_was_chosen_is_chosen_again_before_its_server_starts(tmp_path):
    """The embedded engine loads for minutes after the ports are chosen: a process of another home may
    bind one meanwhile (its claims are not this home's), and the server given it would not start."""
    import socket

    from loadwatch.defaults import Part
    from loadwatch.stack import stack as stack_module
    from tests.conftest import free_port

    settings = StackSettings(home=tmp_path / "home", free_ports=True)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = {Part.CLIENT: free_port(), Part.EXPORTER: taken.getsockname()[1], Part.PROMETHEUS: free_port(),
                 Part.ALERTMANAGER: free_port(), Part.ALERT_LOG: free_port()}
        servers = Servers.engine("http://127.0.0.1:8000", USER)
        stack = Stack(str(run_dir), ports[Part.CLIENT], servers, ports=dict(ports))
        stack_module._choose_again(stack, settings)
    assert stack.ports[Part.EXPORTER] not in ports.values(), "another port, none the stack has for another server"
    others = {name: port for name, port in ports.items() if name != Part.EXPORTER}
    assert {name: stack.ports[name] for name in others} == others, "the free ones kept"
    saved = Stack.load(run_dir / STATE)
    assert saved is not None and saved.ports == stack.ports, "saved before any server starts"
