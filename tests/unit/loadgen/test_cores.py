"""`--processes auto`: a process per core this one may use, the container's CPU quota included."""

from __future__ import annotations

import argparse
import os

import pytest

from loadwatch.loadgen.cores import auto_processes, processes_type, usable_cores


def test_a_cpu_quota_below_the_affinity_sets_the_cores(tmp_path):
    cores = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("100000 100000\n")  # a Kubernetes limit of one CPU
    assert usable_cores(cpu_max) == 1
    cpu_max.write_text("max 100000\n")
    assert usable_cores(cpu_max) == cores
    cpu_max.write_text("50000 100000\n")  # half a CPU: still one process
    assert usable_cores(cpu_max) == 1
    assert usable_cores(tmp_path / "absent") == cores


@pytest.mark.parametrize("worker, cores, processes", [(False, 2, 1), (False, 1, 1), (False, 8, 7), (True, 2, 2),
                                                      (True, 1, 1)])
def test_a_master_leaves_a_core_to_itself_and_the_stack_a_worker_does_not(worker, cores, processes):
    assert auto_processes(worker, cores) == processes


def test_processes_takes_a_number_or_auto_and_names_both_when_refused():
    convert = processes_type(worker=True)
    assert convert("3") == 3 and convert("AUTO") == usable_cores()
    with pytest.raises(argparse.ArgumentTypeError, match="a number or `auto`, not 'many'"):
        convert("many")
