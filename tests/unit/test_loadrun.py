"""One Locust run: its command line from its load, and the generated capacity options with one set
of defaults whether they come from the command line or an experiment file."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from loadwatch.capacity.options import CapacityOptions
from loadwatch.durations import parse_duration
from loadwatch.experiment.pace import MIN_COMPLETED, Pace, too_few
from loadwatch.loadrun.locust import MAX_STRETCH, OPEN_LOOP_USERS, WATCH_SECONDS, Load, LocustRun, enough
from loadwatch.metrics.slo import parse_slo
from loadwatch.model_options import add_model_options, model_from_args


def test_a_level_of_users_is_a_closed_loop_and_a_rate_an_open_one_shared_by_at_most_16_users():
    assert Load.at(3, "users", 10).arguments() == ["-u", "3", "-r", "3", "-t", "10s"]
    assert Load.at(2.5, "req/s", 9.2, warmup_seconds=2).arguments() == [
        "--request-rate", "2.5", "-u", "3", "-r", "3", "-t", "10s", "--warmup-seconds", "2"]
    assert Load.at(100, "req/s", 5).users == OPEN_LOOP_USERS


def test_the_command_names_every_file_and_option_once_and_keeps_the_host_out_of_argv():
    run = LocustRun(Path("chat.py"), Path("out/r.json"), 9646, Load(users=2, duration=5),
                    slo=[parse_slo("ttft_p90_ms=100")], run_name="x.r1", stage_name="level-01",
                    checkpoint_interval=2.0, options=["--max-tokens", "8"])
    command = run.command()
    joined = " ".join(command)
    assert "--results-json out/r.json" in joined and "--metrics-port 9646" in joined
    assert "--run-name x.r1 --stage-name level-01" in joined and "--checkpoint-interval 2" in joined
    assert "--slo=ttft_p90_ms=100" in command and command[-2:] == ["--max-tokens", "8"]
    assert "--engine-metrics" not in command and "-H" not in command and "--host" not in command
    with pytest.raises(ValueError, match="needs its load"):
        LocustRun(Path("chat.py")).command()


def test_the_figures_are_read_from_the_results_or_the_checkpoint_beside_them(tmp_path):
    run = LocustRun(Path("chat.py"), tmp_path / "r.json")
    assert run.figures() is None and run.figures(partial=True) is None
    (tmp_path / "r.partial.json").write_text('{"completed": 3}')
    assert run.figures(partial=True) == {"completed": 3} and run.figures() is None
    (tmp_path / "r.json").write_text('{"completed": 7')  # cut short: unreadable, not a crash
    assert run.figures() is None


def test_a_stretched_run_may_go_on_to_its_limit_and_has_enough_once_it_ran_its_length_and_completed_them():
    run = LocustRun(Path("chat.py"), load=Load.at(2, "users", 25, warmup_seconds=5)).stretched()
    assert run.load is not None and run.load.duration == 5 + MAX_STRETCH * 20  # the warm-up is not stretched
    assert run.checkpoint_interval == WATCH_SECONDS  # the watch reads the checkpoint
    began = time.time()
    assert not enough({"completed": 50}, began, 10, 50)  # its length not yet run
    assert not enough({"completed": 49}, began - 10, 10, 50)
    assert enough({"completed": 50}, began - 10, 10, 50)


def test_capacity_options_have_one_set_of_defaults_on_the_command_line_and_in_a_file():
    parser = argparse.ArgumentParser()
    add_model_options(parser, CapacityOptions)
    from_cli = model_from_args(CapacityOptions, parser.parse_args([]))
    assert from_cli == CapacityOptions() == CapacityOptions.model_validate({})
    assert from_cli.mode == "rate" and from_cli.unit == "req/s"
    given = model_from_args(CapacityOptions, parser.parse_args(["--mode", "users", "--level-duration", "2m",
                                                                "--headroom", "0.5"]))
    assert given == CapacityOptions.model_validate({"mode": "users", "level_duration": "2m", "headroom": 0.5})
    assert given.level_duration == 120
    with pytest.raises(ValueError, match="--headroom: .*less than or equal to 1"):
        model_from_args(CapacityOptions, parser.parse_args(["--headroom", "5"]))
    with pytest.raises(ValueError, match="--warmup: not a duration"):
        model_from_args(CapacityOptions, parser.parse_args(["--warmup", "soon"]))
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "fast"])


def test_durations_are_read_as_people_write_them():
    assert [parse_duration(t) for t in ("500ms", "30s", "2m", "1h", "7")] == [0.5, 30, 120, 3600, 7]


def test_a_cell_too_short_to_judge_says_how_many_completed_what_was_seen_and_what_would_do():
    at_4_per_s = Load(users=1, rate=4.0, duration=6)
    pace = Pace.of({"completed": 3, "p90_e2el_ms": 12_000}, seconds=10)
    assert pace == Pace(12.0, 3) and pace.stop_timeout == 24
    assert Pace.of({"completed": 0}, seconds=10).e2e == 10  # nothing finished: at least the run's length
    assert too_few({"completed": MIN_COMPLETED}, at_4_per_s, pace) is None
    words = too_few({"completed": 2, "median_e2el_ms": 11_500}, at_4_per_s, pace)  # 20 / 4 s + 1.5 x 12 s
    assert words == "too few requests to judge: 2 of 20 completed in 6 s (median E2E 11.5 s); --duration 23s would do"
    assert "no request finished" in too_few({"completed": 0}, Load(users=1, duration=6), None)


def test_a_run_on_a_fleets_stack_names_its_replicas_whatever_options_its_workload_brings():
    from dataclasses import replace

    from loadwatch.fleet.servers import HERE, FrontRouter, Servers
    from loadwatch.loadrun.stack import on_stack
    from loadwatch.processes import Component
    from loadwatch.stack.stack import Stack

    fleet = Servers(owner=HERE, url="http://127.0.0.1:8000", replicas={"a": "http://127.0.0.1:8001"},
                    router=FrontRouter(program="vllm-router"))
    stack = Stack("run", 9646, fleet, components=[Component("exporter", 1, "http://127.0.0.1:9647", "exporter.log")])
    template = on_stack(LocustRun(Path("chat.py")), stack)
    # An experiment's cell and a capacity level replace the workload's options; the fleet's stay.
    run = replace(template, load=Load(users=1, duration=5), options=["--dataset", "random"])
    command = run.command()
    assert "--replica=a=http://127.0.0.1:8001" in command and "--dataset" in command
    assert command[command.index("--metrics-port") + 1] == "9646"
    assert command[command.index("--engine-metrics") + 1] == "http://127.0.0.1:9647/metrics"


def test_a_run_left_by_an_error_of_loadwatchs_own_leaves_no_locust_behind(monkeypatch, tmp_path):
    """A tune whose output pipe closed mid-trial exited with its Locust still sending, orphaned."""
    import subprocess

    class Locust:  # a Locust that runs until it is killed
        killed = False

        def __init__(self, *args, **kwargs) -> None:
            pass

        def poll(self) -> int | None:
            return -9 if self.killed else None

        def wait(self, timeout: float | None = None) -> int:
            if not self.killed:
                raise subprocess.TimeoutExpired("locust", timeout or 0)
            return -9

        def kill(self) -> None:
            self.killed = True

    started: list[Locust] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(Locust()) or started[-1])

    def broken() -> str | None:
        raise BrokenPipeError("stdout closed")

    run = LocustRun(Path("chat.py"), results=tmp_path / "results.json", load=Load(users=1, duration=1.0))
    with pytest.raises(BrokenPipeError):
        run.run("http://127.0.0.1:9", tmp_path / "locust.log", watch=broken, watch_every=0.01)
    assert started and started[0].killed
