"""SIGTERM as Ctrl-C, and never lost.

Python runs a signal's handler between two bytecodes of the main thread, wherever they are. Inside
the callbacks a fork runs (logging releases its locks after every subprocess start), the
KeyboardInterrupt it raises is printed as "Exception ignored" and dropped: an experiment sent
SIGTERM while it started a cell's Locust ran on through all its cells. The handler so also notes the
interrupt, and the loops that wait long ask for it again (`raise_if_interrupted`).

Raised inside `subprocess.Popen`, after the fork, it left the child running with no one knowing its
PID: a tune sent SIGTERM as a trial's Locust started exited with that Locust still running. A child
is so started `held`: the interrupt waits until its starter knows it.

The exception raised is `Interrupted`, a KeyboardInterrupt of its own class, so that every `except
KeyboardInterrupt` takes it while CPython does not. Where a KeyboardInterrupt itself ends code run
from a string (`exec` of a string: the code a dataclass or namedtuple is made of, as modules are
imported), CPython marks it unhandled even when a caller catches it, and a process run with `python
-m` then ends by SIGINT whatever its exit code: a sidecar sent SIGTERM as it started said
"interrupted" and still died -2 (about 1 start in 70 here, and once in CI). CPython checks the class by
identity (pymain_run_module, run_eval_code_obj), so a subclass is passed over.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(KeyboardInterrupt):
    """A stop signal's KeyboardInterrupt (the module's docstring says why a class of its own)."""


_interrupted = False
_holding = 0  # how many `held` blocks the main thread is in
_pending = False  # an interrupt came while held


def _interrupt(_signum, _frame) -> None:
    global _interrupted, _pending
    _interrupted = True
    if _holding:
        _pending = True
        return
    raise Interrupted  # what was started is stopped, what was measured kept


def catch_interrupts() -> None:
    """SIGTERM and SIGINT raise Interrupted (a KeyboardInterrupt) in the main thread, and are noted."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)


@contextmanager
def held() -> Iterator[None]:
    """An interrupt that comes in the body is raised at its end: a process started in it is then
    known (and recorded) by the time the KeyboardInterrupt stops what was started. For the main
    thread, where Python runs the handler."""
    global _holding, _pending
    _holding += 1
    try:
        yield
    finally:
        _holding -= 1
        if not _holding and _pending:  # over what the body raised, as it would have been
            _pending = False
            raise Interrupted


def raise_if_interrupted() -> None:
    """KeyboardInterrupt again where a signal's came and was dropped: once interrupted, a process
    winds down."""
    if _interrupted:
        raise Interrupted
