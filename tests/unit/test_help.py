"""`--help` of every command as its users call it: `loadwatch`, each subcommand and any nested one, and
Locust's with loadwatch's options on it. argparse formats a help text only when asked, so a broken
one (a bare `%` in it, as `compare`'s `--fail-on` default had) passes every parse and fails only here.
Each option also says what it does: an option without a help text is a reference row without one."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest
from locust.argument_parser import get_parser

import loadwatch.loadgen  # noqa: F401  registers the plugin that adds loadwatch's options to Locust's parser
from loadwatch import cli


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                                       argparse.ArgumentParser]]:
    """Every (command words, its parser) below `parser`, nested subcommands included."""
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += commands(sub, (*path, name))
    return found


COMMANDS = commands(cli.parser())


def test_every_subcommand_is_walked():
    names = {" ".join(words) for words, _ in COMMANDS}
    assert {"compare", "capacity", "tune", "experiment", "history", "run", "engine", "exporter"} <= names


@pytest.mark.parametrize("words", [words for words, _ in COMMANDS], ids=lambda words: " ".join(words) or "loadwatch")
def test_help_prints_and_exits_0(words):
    said = io.StringIO()
    with contextlib.redirect_stdout(said), pytest.raises(SystemExit) as exit_info:
        cli.main([*words, "--help"])
    assert exit_info.value.code == 0
    assert said.getvalue().startswith("usage: loadwatch"), said.getvalue()[:200]


@pytest.mark.parametrize(("words", "parser"), COMMANDS, ids=[" ".join(w) or "loadwatch" for w, _ in COMMANDS])
def test_every_option_says_what_it_does(words, parser):
    silent = [action.option_strings[-1] if action.option_strings else action.dest for action in parser._actions
              if not action.help and not isinstance(action, argparse._SubParsersAction)]
    assert not silent, f"loadwatch {' '.join(words)}: no help for {', '.join(silent)}"


def test_locust_help_with_loadwatchs_options_prints():
    text = get_parser(default_config_files=[]).format_help()
    assert "--slo" in text and "--replica" in text
