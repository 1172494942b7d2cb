"""The one model of the servers under test: a single engine is a set of one, a fleet replicas behind a
router; state files of before it are read as it."""

from __future__ import annotations

import json

from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.routers import VllmRouter
from loadwatch.fleet.servers import ENGINE, HERE, USER, FrontRouter, Resizing, Servers
from loadwatch.stack.stack import STATE, Stack


def fleet(**scaling) -> Servers:
    return Servers(owner=HERE, url="http://r:8000", replicas={"a": "http://x:1", "b": "http://y:1"},
                   router=FrontRouter(program="vllm-router", metrics="http://r:29000"), scaling=Resizing(**scaling))


def test_a_single_engine_is_one_replica_named_as_the_sidecar_names_it():
    engine = Servers.engine("http://127.0.0.1:8000", USER)
    assert engine.replicas == {ENGINE: "http://127.0.0.1:8000"} and not engine.fleet
    assert engine.exporter_options() == ["--target=vllm=http://127.0.0.1:8000"]
    assert engine.locust_options() == [], "a single engine's requests name no replica"


def test_a_fleets_replicas_and_router_are_the_sidecars_targets_and_locusts_replicas():
    servers = fleet()
    assert servers.exporter_options() == ["--target=a=http://x:1", "--target=b=http://y:1",
                                          "--router=vllm-router=http://r:29000"]
    assert servers.locust_options() == ["--replica=a=http://x:1", "--replica=b=http://y:1"]
    assert fleet(patterns=["vllm-*"]).locust_options() == ["--replica=vllm-*"]
    assert isinstance(servers.program, VllmRouter)


def test_scaling_keeps_what_the_fleet_options_asked():
    scaling = Resizing.of(FleetOptions(scale="s {replicas}", scale_timeout="2m", replica=["a=http://x:1"]))
    assert (scaling.command, scaling.timeout, scaling.named, scaling.patterns) == ("s {replicas}", 120.0, True, [])
    assert not Resizing.of(FleetOptions(replica=["vllm-*"])).named


def test_servers_survive_the_state_file():
    servers = fleet(command="s {replicas}", named=True)
    assert Servers.model_validate(json.loads(servers.model_dump_json())) == servers


def test_state_files_of_before_are_read_as_servers(tmp_path):
    def load(**fields) -> Stack:
        path = tmp_path / STATE
        path.write_text(json.dumps({"run_dir": str(tmp_path), "client_port": 9646, "components": [], "owner": 1,
                                    "ports": {}, **fields}))
        stack = Stack.load(path)
        assert stack is not None
        return stack

    # Of before fleets: its embedded engine was always its own.
    engine = load(target="http://127.0.0.1:8000", engine_started=True).servers
    assert engine == Servers.engine("http://127.0.0.1:8000", HERE, home_engine=True)
    users = load(target="http://g:8000", engine_started=False, own_engine=False, fleet=None).servers
    assert users == Servers.engine("http://g:8000", USER)
    embedded = load(target="http://r:8000", engine_started=True, own_engine=False, fleet={
        "router": "smg", "url": "http://r:8000", "replicas": {"a": "http://x:1"}, "metrics": "http://r:29000",
        "policy": "cache_aware", "patterns": [], "scale": None, "scale_timeout": 900.0, "named": False}).servers
    assert embedded == Servers(owner=HERE, url="http://r:8000", replicas={"a": "http://x:1"},
                               router=FrontRouter(program="smg", metrics="http://r:29000", policy="cache_aware"))
    own = load(target="http://r:8000", engine_started=False, own_engine=False, fleet={
        "router": "vllm-router", "url": "http://r:8000", "replicas": {"vllm-0": "http://p:1"},
        "patterns": ["vllm-*"], "scale": "s {replicas}", "scale_timeout": 60.0, "named": False}).servers
    assert (own.owner, own.home_engine, own.scaling) == (USER, False, Resizing(command="s {replicas}", timeout=60.0,
                                                                               patterns=["vllm-*"]))


def test_the_request_url_keeps_the_users_credentials_out_of_the_state_file():
    servers = Servers.engine("http://g:8000", USER)
    servers.request_url = "http://me:secret@g:8000"
    assert "secret" not in servers.model_dump_json() and "request_url" not in servers.model_dump()
