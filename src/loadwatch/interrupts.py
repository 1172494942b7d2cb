"""SIGTERM as Ctrl-C, and never lost.

Python runs a signal's handler between two bytecodes of the main thread, wherever they are. Inside
the callbacks a fork runs (logging releases its locks after every subprocess start), the
KeyboardInterrupt it raises is printed as "Exception ignored" and dropped: an experiment sent
SIGTERM while it started a cell's Locust ran on through all its cells. The handler so also notes the
interrupt, and the loops that wait long ask for it again (`raise_if_interrupted`).
"""

from __future__ import annotations

import signal

_interrupted = False


def _interrupt(_signum, _frame) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt  # what was started is stopped, what was measured kept


def catch_interrupts() -> None:
    """SIGTERM and SIGINT raise KeyboardInterrupt in the main thread, and are noted."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)


def raise_if_interrupted() -> None:
    """KeyboardInterrupt again where a signal's came and was dropped: once interrupted, a process
    winds down."""
    if _interrupted:
        raise KeyboardInterrupt
