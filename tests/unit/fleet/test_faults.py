"""`--fault-at TIME=ACTION:REPLICA[:DURATION]` (fleet/faults.py): the plan as given, the bad input
refused in one line before anything starts, and the cap a refused replica is given. A fault made on
real replicas: tests/e2e/test_fleet_faults.py."""

from __future__ import annotations

import json

import pytest

from loadwatch.cli import main, parser
from loadwatch.fleet.faults import FAULTS, Fault, cap_of, killed_replicas, parse_faults, with_refusal_cap
from loadwatch.fleet.options import ServerOptions


def test_a_plan_is_read_in_time_order_each_fault_with_its_duration():
    assert parse_faults(["1m=stop:a:20s", "30s=kill:b", "0s=refuse:b:1m"]) == [
        (0.0, Fault("refuse", "b", 60.0)), (30.0, Fault("kill", "b", None)), (60.0, Fault("stop", "a", 20.0))]


@pytest.mark.parametrize(("item", "said"), [
    ("30s", "is not TIME=ACTION:REPLICA"), ("soon=kill:b", "is not TIME=ACTION:REPLICA"),
    ("30s=kill", "with ACTION kill, stop or refuse"), ("30s=crash:b", "with ACTION kill, stop or refuse"),
    ("30s=kill:b:20s", "kill takes no duration"), ("30s=stop:b", "stop lasts a while: give its duration"),
    ("30s=refuse:b", "refuse lasts a while"), ("30s=stop:b:soon", "'soon' is not a duration"),
    ("30s=stop:b:0s", "'0s' is not a duration")])
def test_a_malformed_fault_is_refused_by_name(item, said):
    with pytest.raises(ValueError, match=f"--fault-at '{item}'.*{said}"):
        parse_faults([item])


@pytest.mark.parametrize(("options", "said"), [
    ({"replicas": 2, "faults": [(5.0, Fault("kill", "c", None))]}, "--fault-at names c, not one of the replicas "
                                                                    r"\(a, b\)"),
    ({"target": "http://gpu:8000", "faults": [(5.0, Fault("kill", "b", None))]}, "a server it does not own"),
    ({"faults": [(5.0, Fault("kill", "b", None))]}, "an embedded fleet's replicas: give --replicas N")])
def test_a_fault_on_a_replica_loadwatch_did_not_start_is_refused(options, said):
    with pytest.raises(ValueError, match=said):
        ServerOptions(**options)


@pytest.fixture(scope="module")
def built() -> None:
    """The command line's parser built once: its modules' first import is no part of a bad input's answer."""
    parser()


@pytest.mark.parametrize(("argv", "said"), [
    (["--replicas", "2", "--fault-at", "10s=stop:b"], "stop lasts a while"),
    (["--replicas", "2", "--fault-at", "10s=kill:c"], "not one of the replicas (a, b)"),
    (["--target", "http://127.0.0.1:9", "--fault-at", "10s=kill:b"], "does not own (--target)"),
    (["--fault-at", "10s=kill:b"], "give --replicas N")])
def test_bad_input_ends_the_run_with_one_line_and_exit_2_before_anything_starts(argv, said, capsys, tmp_path, built):
    assert main(["run", "--out", str(tmp_path), *argv]) == 2
    out = capsys.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("loadwatch: error: --fault-at") and said in lines[0], lines
    assert not any(tmp_path.iterdir()), "no run folder: nothing started"


def test_a_refused_replica_is_capped_at_the_runs_users_unless_it_has_a_cap_of_its_own():
    planned = ServerOptions(replicas=2, faults=parse_faults(["10s=refuse:b:5s", "20s=kill:a"]))
    capped = with_refusal_cap(planned, [], users=8)
    assert capped.replica_arg == ["b=--max-num-queued-reqs=8"] and cap_of(capped, [], "b") == 8
    assert cap_of(capped, [], "a") is None, "a kill needs no cap"
    own = planned.changed({"replica_arg": ["b=--max-num-queued-reqs=3"]})
    assert with_refusal_cap(own, [], users=8).replica_arg == ["b=--max-num-queued-reqs=3"]
    assert with_refusal_cap(planned, ["--max-num-queued-reqs=5"], users=8) is planned  # the fleet's flag holds
    assert cap_of(own, ["--max-num-queued-reqs=5"], "b") == 3, "the replica's own flag comes before the fleet's"


def test_the_replicas_a_fault_killed_are_no_death_to_report(tmp_path):
    assert killed_replicas(tmp_path) == set()
    (tmp_path / FAULTS).write_text(json.dumps({"started_at": 1.0, "events": [
        {"action": "stop", "replica": "a", "error": None}, {"action": "kill", "replica": "b", "error": None},
        {"action": "kill", "replica": "c", "error": "c's engine: No such process"}]}))
    assert killed_replicas(tmp_path) == {"replica-b"}
