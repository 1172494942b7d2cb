"""An interrupt a fork's callbacks dropped is raised again where a long wait next looks."""

import signal

import pytest

from loadwatch import interrupts


def test_an_interrupt_is_noted_and_raised_again(monkeypatch):
    monkeypatch.setattr(interrupts, "_interrupted", False)
    interrupts.raise_if_interrupted()  # nothing yet
    with pytest.raises(KeyboardInterrupt):
        interrupts._interrupt(signal.SIGTERM, None)  # as Python runs it: where it may be dropped
    with pytest.raises(KeyboardInterrupt):
        interrupts.raise_if_interrupted()
