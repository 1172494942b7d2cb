"""Locust's entry points: loadwatch's options on its parser, and each process's role at init."""

from __future__ import annotations

import sys

from locust import events

from loadwatch.loadgen import roles
from loadwatch.loadgen.options import add_options
from loadwatch.loadgen.process import settings_from, take_credentials

BAD_OPTIONS = 2  # README's exit codes: as argparse exits on a malformed command line
events.init_command_line_parser.add_listener(add_options)


@events.init.add_listener
def on_init(environment, **_kwargs) -> None:
    try:
        settings = settings_from(environment.parsed_options)
        roles.install(environment, settings, take_credentials(environment, settings))
    except ValueError as exc:  # invalid options, or a secret that cannot be read
        print(exc if str(exc).startswith("loadwatch:") else f"loadwatch: {exc}", file=sys.stderr, flush=True)
        sys.exit(BAD_OPTIONS)
