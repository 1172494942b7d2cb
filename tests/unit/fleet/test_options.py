"""How a command asks for a fleet (fleet/options.py): each option refused where it cannot be meant,
with the words a user needs, before anything starts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from loadwatch.fleet.options import FleetOptions, ServerOptions, is_pattern, replica_name
from loadwatch.fleet.routers import Smg, VllmRouter


def refused(match: str, **options) -> None:
    with pytest.raises(ValidationError, match=match):
        FleetOptions(**options)


def test_the_router_is_one_the_registry_knows_and_vllm_router_where_none_is_named():
    assert isinstance(FleetOptions(replicas=2).program, VllmRouter)
    assert isinstance(FleetOptions(replicas=2, router="smg").program, Smg)
    refused("does not know the router 'envoy'; it knows smg, vllm-router", router="envoy")


def test_embedded_replicas_are_named_a_to_z_then_by_their_index():
    assert FleetOptions(replicas=3).names() == ["a", "b", "c"]
    assert [replica_name(i) for i in (0, 25, 26, 99)] == ["a", "z", "r26", "r99"]
    assert FleetOptions().names() == []


def test_a_replica_flag_names_a_started_replica_and_goes_to_it_alone():
    options = FleetOptions(replicas=2, replica_arg=["b=--max-num-seqs=1", "b=--enforce-eager", "a=--seed=1"])
    assert options.flags_of("b") == ["--max-num-seqs=1", "--enforce-eager"] and options.flags_of("a") == ["--seed=1"]
    refused("--replica-arg names c, not one of the replicas \\(a, b\\)", replicas=2, replica_arg=["c=--seed=1"])
    refused("none: give --replicas N", replica_arg=["a=--seed=1"])
    refused("'b' is not NAME=VALUE \\[", replicas=2, replica_arg=["b"])  # no pattern offered: a flag names a replica


def test_a_replica_of_your_own_is_a_name_with_a_url_or_a_pattern_of_the_names_it_answers_with():
    assert FleetOptions(replica=["vllm-*"]).patterns == ("vllm-*",)
    assert FleetOptions(replica=["a=http://x:8000"]).patterns == ()
    assert is_pattern("vllm-[ab]") and is_pattern("pod?") and not is_pattern("a")
    refused("a pattern .* takes no URL", replica=["vllm-*=http://x:8000"])
    refused("is not NAME=VALUE or a pattern of names", replica=["http://x:8000"])
    refused("names with URLs or patterns of names, not both", replica=["a=http://x:8000", "vllm-*"])


def test_a_fleet_is_started_or_named_not_both():
    refused("--replicas starts a fleet, --replica names one of yours", replicas=2, replica=["a=http://x:8000"])


def test_the_scale_command_says_where_the_count_goes():
    assert FleetOptions(scale="kubectl scale deployment/vllm --replicas={replicas}").scale is not None
    refused("has no \\{replicas\\}", scale="kubectl scale deployment/vllm --replicas=2")
    refused("greater than 0", scale_timeout="0s")


@pytest.mark.parametrize("options", [{"replicas": 1}, {"replica": ["a=http://x:1"]}, {"router": "smg"},
                                     {"router_metrics": "http://r:29000"}, {"scale": "s {replicas}"}])
def test_any_fleet_option_asks_for_a_fleet(options):
    assert FleetOptions(**options).wanted
    assert not FleetOptions(router_policy="power_of_two").wanted  # a policy alone: of no router




def server_refused(match: str, **options) -> None:
    with pytest.raises(ValidationError, match=match):
        ServerOptions(**options)


def test_the_embedded_fleet_and_a_fleet_of_your_own_are_asked_for_apart():
    server_refused("--replicas starts a fleet on this machine", replicas=2, target="http://r:8000")
    for mine in ({"replica": ["a=http://x:1"]}, {"router_metrics": "http://r:29000"}, {"scale": "s {replicas}"}):
        server_refused("are for your own fleet: give --target", **mine)
        assert ServerOptions(target="http://r:8000", **mine).wanted
    server_refused("--router names the router of a fleet", router="smg")
    assert ServerOptions(router="smg", target="http://r:8000").wanted
    assert ServerOptions(router="smg", replicas=2).embedded


def test_a_fleet_whose_replicas_change_has_two_to_change_among():
    how = r"give --replicas N \(2 or more\) for the embedded fleet, or --target ROUTER with --scale"
    server_refused("--scale-at changes a fleet's replicas: " + how, plan=[(0.0, 1)])
    server_refused("--scale-at changes a fleet's replicas", replicas=1, plan=[(0.0, 1)])
    server_refused("--scaling compares one replica with the fleet: " + how, scaling=True, replicas=1)
    server_refused("--scale-at asks for more replicas than --replicas 2 starts", replicas=2, plan=[(0.0, 3)])
    assert ServerOptions(replicas=2, plan=[(0.0, 1), (60.0, 2)], scaling=True).plan == [(0.0, 1), (60.0, 2)]
    assert ServerOptions(target="http://r:8000", scale="s {replicas}", plan=[(0.0, 5)], scaling=True).scaling


def test_an_embedded_fleet_and_one_scaled_by_your_command_are_loadwatchs_to_resize():
    assert FleetOptions(replicas=1).embedded and FleetOptions(replicas=1).resizable
    assert FleetOptions(scale="s {replicas}").resizable and not FleetOptions(scale="s {replicas}").embedded
    assert not FleetOptions(replica=["a=http://x:1"]).resizable


def test_an_embedded_fleet_names_the_ports_it_needs():
    assert FleetOptions(replicas=2).parts() == ["replica-a", "replica-b", "router", "router-metrics"]
    assert FleetOptions(router="smg").parts() == []


def test_options_changed_are_checked_again_as_the_model_they_are():
    mine = ServerOptions(target="http://r:8000", scale="s {replicas}").changed({"router": "smg"})
    assert isinstance(mine, ServerOptions) and mine.router == "smg" and mine.scale == "s {replicas}"
    with pytest.raises(ValidationError, match="--replicas starts a fleet on this machine"):
        mine.changed({"replicas": 2})
