"""An interrupt a fork's callbacks dropped is raised again where a long wait next looks; one that
comes while a process starts waits until its starter knows it."""

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


def test_an_interrupt_while_held_is_raised_at_the_end_of_the_outermost_hold(monkeypatch):
    monkeypatch.setattr(interrupts, "_interrupted", False)
    monkeypatch.setattr(interrupts, "_pending", False)
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.held():
            with interrupts.held():
                interrupts._interrupt(signal.SIGTERM, None)
                reached.append("inner")
            reached.append("outer")  # the inner hold's end lets nothing through
    assert reached == ["inner", "outer"]
    with interrupts.held():  # raised once, not again at the next hold
        pass
    with pytest.raises(KeyboardInterrupt):
        interrupts.raise_if_interrupted()


def test_an_interrupt_while_held_goes_over_what_the_body_raised(monkeypatch):
    monkeypatch.setattr(interrupts, "_interrupted", False)
    monkeypatch.setattr(interrupts, "_pending", False)
    with pytest.raises(KeyboardInterrupt) as raised:
        with interrupts.held():
            interrupts._interrupt(signal.SIGTERM, None)
            raise FileNotFoundError("python")
    assert isinstance(raised.value.__context__, FileNotFoundError)


def test_a_stop_as_the_handlers_are_installed_exits_130_not_by_sigint(monkeypatch):
    """signal.signal runs a pending handler before it returns: a SIGTERM that came between the two
    installs raised KeyboardInterrupt from the install itself, and a sidecar stopped then died by
    SIGINT (-2, once in CI's 40 random stops)."""
    from loadwatch import cli

    saved = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}

    def stopped_as_installed() -> None:
        interrupts.catch_interrupts()
        interrupts._interrupt(signal.SIGTERM, None)

    monkeypatch.setattr(interrupts, "_interrupted", False)
    monkeypatch.setattr(cli, "catch_interrupts", stopped_as_installed)
    try:
        assert cli.main(["--help"]) == 130
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)
