"""A capacity report ends with the commands that go on from it, and they parse as loadwatch's own (issue 52)."""

from __future__ import annotations

import shlex
from pathlib import Path

from loadwatch.capacity.command import next_steps
from loadwatch.capacity.options import CapacityOptions
from loadwatch.cli import parser
from loadwatch.fleet.options import FleetOptions, ServerOptions
from loadwatch.loadrun.locust import LocustRun
from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.slo import parse_slo
from loadwatch.model_options import model_from_args
from loadwatch.tune.options import TuneOptions

RESULT = Capacity(mode="users", unit="users", limit="batch_slots", max_sustainable=8.0, decisive_level="level-05")
LOADWATCH = parser()  # built once, at collection


def test_tune_goes_on_with_the_searchs_own_options_and_explain_on_the_level_that_broke():
    options = CapacityOptions(mode="users", level_duration=20.0, start=2)
    template = LocustRun(Path("chat.py"), slo=[parse_slo("ttft_p99_ms=500")], options=["--max-tokens", "64"])
    fleet = FleetOptions(replicas=2, replica_arg=["b=--max-num-seqs=1"])
    tune, explain = next_steps(options, template, None, ["--max-num-seqs=4"], fleet, Path("runs/X"), RESULT)
    words = shlex.split(tune["command"])
    cut = words.index("--")
    args = LOADWATCH.parse_args(words[1:cut])
    assert args.command == "tune" and args.slo == ["ttft_p99_ms=500"] and words[cut + 1:] == ["--max-tokens", "64"]
    assert model_from_args(CapacityOptions, args) == options
    assert model_from_args(FleetOptions, args) == fleet and args.vllm_args == ["--max-num-seqs=4"]
    model_from_args(TuneOptions, args)
    assert "batch_slots" in tune["why"]
    assert shlex.split(explain["command"]) == ["loadwatch", "explain", "runs/X/levels/level-05.json", "--slowest", "5"]
    assert LOADWATCH.parse_args(shlex.split(explain["command"])[1:]).command == "explain"


def test_a_fleet_of_your_own_goes_on_to_tune_with_its_fleet_options_alone():
    """capacity --scaling against --target: tune takes the fleet's options, not --scaling nor the target twice."""
    template = LocustRun(Path("chat.py"), slo=[parse_slo("ttft_p99_ms=500")])
    fleet = ServerOptions(target="http://r:8000", scale="s {replicas}", scaling=True)
    (tune, _) = next_steps(CapacityOptions(), template, "http://r:8000", [], fleet, Path("r"), RESULT)
    args = LOADWATCH.parse_args(shlex.split(tune["command"])[1:])
    assert args.target == "http://r:8000" and args.scale == "s {replicas}" and "--scaling" not in tune["command"]


def test_against_a_target_tune_asks_for_the_restart_command_and_no_knee_means_no_tune():
    template = LocustRun(Path("chat.py"), slo=[parse_slo("ttft_p99_ms=500")])
    (tune, _) = next_steps(CapacityOptions(), template, "http://gpu1:8000", [], None, Path("r"), RESULT)
    assert "--target http://gpu1:8000 --restart 'YOUR-RESTART-COMMAND {vllm_args}'" in tune["command"]
    unlocated = RESULT.model_copy(update={"max_sustainable": None})
    steps = next_steps(CapacityOptions(), template, None, [], None, Path("r"), unlocated)
    assert [s["command"].split()[1] for s in steps] == ["explain"]


def test_a_full_batch_is_compared_with_the_highest_level_whose_batch_was_clearly_smaller():
    """A search narrows the knee to levels whose batches are all full (139 held, 140 broke, both 128
    running): compute binds when from a smaller batch (64 at 64 users) to the full one the output did
    not grow, which the level just below cannot show (the prefix scenario of docs/guides/tune.md)."""
    from loadwatch.capacity.command import _below
    from loadwatch.capacity.levels import Level

    def level(users: int, running: float, throughput: float) -> Level:
        return Level(users, users, "users", f"level-{users}", results={"output_throughput": throughput},
                     engine={"requests_running_peak": running})

    levels = [level(32, 32, 1900), level(64, 64, 2030), level(128, 112, 2080), level(139, 128, 1640),
              level(140, 128, 1570)]
    results, engine = _below(levels, levels[-1])
    assert engine["requests_running_peak"] == 64 and results["output_throughput"] == 2030
    flat = [level(8, 8, 500), level(9, 9, 560)]  # no level clearly smaller: the highest below
    assert _below(flat, flat[-1])[1]["requests_running_peak"] == 8


def test_the_full_batch_is_credited_with_the_most_a_level_served_with_it():
    """tune's step 1 on 2026-11-27: 8 and 16 users ran the full batch of 8 (1,683 and 1,902 tok/s), the
    decisive 17 users, cut short, measured 1,176 while its queue filled; 4 users (4 running) and 32
    users (above the decisive one) do not count."""
    from loadwatch.capacity.command import _full_served
    from loadwatch.capacity.levels import Level

    def level(users: int, running: float, throughput: float) -> Level:
        return Level(users, users, "users", f"level-{users}", results={"output_throughput": throughput},
                     engine={"requests_running_peak": running})

    levels = [level(4, 4, 1036), level(8, 8, 1683), level(16, 8, 1902), level(32, 8, 2500), level(17, 8, 1176)]
    assert _full_served(levels, levels[-1]) == 1902
    assert _full_served(levels, None) is None
