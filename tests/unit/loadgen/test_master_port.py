"""A master that forks its own workers takes a free port unless one is named: two distributed runs on
one host then never meet (tests/integration/test_distributed.py runs two at once)."""

from __future__ import annotations

import pytest

from loadwatch.loadgen.options import spawns_own_workers


@pytest.mark.parametrize("argv, environ, spawns", [
    (["-f", "chat.py", "--processes", "2"], {}, True),
    (["--processes=4", "--headless"], {}, True),
    (["--headless"], {"LOCUST_PROCESSES": "2"}, True),
    (["--headless"], {}, False),  # one process: no master at all
    (["--worker", "--processes", "4"], {}, False),  # workers of a master elsewhere, on its port
    (["--processes", "2"], {"LOCUST_WORKER": "true"}, False),
    (["--processes", "2", "--master-bind-port", "6000"], {}, False),  # a port the user chose is kept
    (["--processes", "2", "--master-port=6000"], {}, False),
    (["--processes", "2"], {"LOCUST_MASTER_BIND_PORT": "6000"}, False),
])
def test_a_master_of_its_own_workers_takes_a_free_port_unless_one_is_named(argv, environ, spawns):
    assert spawns_own_workers(argv, environ) is spawns
