"""loadwatch's options on Locust's own parser, generated from the fields of LoadSettings.

Locust's parser gives each option a command-line flag, a LOCUST_* environment variable, a line in
locust.conf and (unless hidden) a web-UI field; LoadSettings then validates what it found.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence

from locust.argument_parser import LocustArgumentParser

from loadwatch.credentials import refused_on_command_line
from loadwatch.defaults import LOOPBACK
from loadwatch.loadgen.cores import accept_auto
from loadwatch.locust_options import argument
from loadwatch.processes import port_or_free
from loadwatch.settings import LoadSettings


def add_options(parser: LocustArgumentParser, **_kwargs) -> None:
    # Locust's own add_argument, never a group's: only it knows the web UI fields.
    for name, field in LoadSettings.model_fields.items():
        flag, kwargs = argument(name, field)
        parser.add_argument(flag, **kwargs)
    parser.add_argument("--api-key", help=argparse.SUPPRESS, include_in_web_ui=False,
                        action=refused_on_command_line("Put the key in $OPENAI_API_KEY, or in a file named by "
                                                       "--api-key-file or $OPENAI_API_KEY_FILE."))
    accept_auto(parser, worker=given("--worker", sys.argv[1:], os.environ))
    # Nothing listens beyond this machine unless asked: Locust's own defaults are all interfaces.
    parser.set_defaults(web_host=LOOPBACK, master_bind_host=LOOPBACK)
    if spawns_own_workers(sys.argv[1:], os.environ):
        port = port_or_free()
        parser.set_defaults(master_bind_port=port, master_port=port)


def given(flag: str, argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    env = "LOCUST_" + flag.removeprefix("--").replace("-", "_").upper()
    return any(a == flag or a.startswith(flag + "=") for a in argv) or bool(environ.get(env))


def spawns_own_workers(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether this is a master that forks its own workers (--processes, not --worker) on a port
    nobody named: it then takes a free port rather than Locust's 5557, where a second run on the host
    failed to bind with a traceback while its workers joined the first run's master."""
    return (given("--processes", argv, environ) and not given("--worker", argv, environ)
            and not given("--master-bind-port", argv, environ) and not given("--master-port", argv, environ))
