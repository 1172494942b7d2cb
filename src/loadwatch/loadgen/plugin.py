"""Locust's entry points: loadwatch's options on its parser, and each process's role at init."""

from __future__ import annotations

import signal
import socket
import sys

import gevent
from locust import events

from loadwatch.interrupts import Interrupted
from loadwatch.loadgen import roles
from loadwatch.loadgen.options import add_options
from loadwatch.loadgen.process import settings_from, take_credentials
from loadwatch.loadgen.results import BAD_INPUT_EXIT_CODE

events.init_command_line_parser.add_listener(add_options)


@events.init.add_listener
def on_init(environment, web_ui=None, **_kwargs) -> None:
    interrupt_the_main_greenlet()
    if web_ui is not None and (problem := cannot_bind(web_ui.host, web_ui.port)):
        # Locust binds its web UI later, in a greenlet whose failure is a traceback.
        print(f"loadwatch: cannot serve the web UI on {web_ui.host or '*'}:{web_ui.port}: {problem}; choose "
              "another --web-port (or --web-host)", file=sys.stderr, flush=True)
        sys.exit(BAD_INPUT_EXIT_CODE)
    try:
        settings = settings_from(environment.parsed_options)
        roles.install(environment, settings, take_credentials(environment, settings))
    except ValueError as exc:  # invalid options, or a secret that cannot be read
        print(exc if str(exc).startswith("loadwatch:") else f"loadwatch: {exc}", file=sys.stderr, flush=True)
        sys.exit(BAD_INPUT_EXIT_CODE)
    # gevent's loop, made before this init, keeps the time it last ran until it runs again: Locust's
    # run-time timer, set next, would count this init's seconds (the dataset built) as the run's.
    gevent.get_hub().loop.update_now()


def interrupt_the_main_greenlet() -> None:
    """Ctrl-C (and the SIGINT that loadwatch passes on to stop a run) as a KeyboardInterrupt in the
    main greenlet, where Locust waits for it to stop its users gracefully and write its stats.

    Python raises it in whatever greenlet runs when the signal comes: in a user mid-stream, or any
    greenlet busy at that moment, gevent printed a traceback and that user's request was lost (a CI
    run's interrupt test failed so, on a busy machine). The handler is Python's, not gevent's
    signal_handler, which made gevent's loop before the rest of init: its clock stood still through
    it, and Locust's run-time timer, set next, came due at once (a 2 s run ended 26 ms in)."""
    main = gevent.getcurrent()  # init runs in Locust's main greenlet

    def interrupt(_signum, _frame) -> None:
        if gevent.getcurrent() is main:
            raise Interrupted  # not KeyboardInterrupt itself: loadwatch/interrupts.py says why
        gevent.kill(main, Interrupted)

    signal.signal(signal.SIGINT, interrupt)


def cannot_bind(host: str, port: int) -> str | None:
    """Why a server could not listen there (a port taken, an address not this host's), or None."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Locust's server does
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None
