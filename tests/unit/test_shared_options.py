"""The options several commands share have one home (shared_options.py, fleet/options.py): one help text
wherever they are offered. An SLO is parsed where the command line is read: a bad one is refused in one
line, exit code 2, before anything starts, by every command that takes one and by Locust's plugin."""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess

import pytest
from locust.argument_parser import get_parser

import loadwatch.capacity.command  # noqa: F401  the commands' own imports, made at collection, not in a test
import loadwatch.experiment.command  # noqa: F401
import loadwatch.loadgen  # noqa: F401  registers the plugin that adds loadwatch's options to Locust's parser
import loadwatch.run  # noqa: F401
import loadwatch.tune.command  # noqa: F401
from loadwatch import cli
from loadwatch.loadrun import stack
from loadwatch.metrics.slo import FORMS
from loadwatch.shared_options import SharedOptions

REFUSED = f"'nonsense': not NAME=LIMIT; {FORMS}"
# Options that several commands offer under one name, and the commands that offer each.
SHARED = {"--target": {"up", "run", "capacity", "tune"}, "--slo": {"run", "capacity", "tune"},
          "--locustfile": {"run", "capacity", "tune", "experiment"},
          "--out": {"up", "run", "capacity", "tune", "experiment"}, "--replica": {"up", "run", "capacity", "tune"}}
# The sidecar's --target is another option under the same name: NAME=URL, the vLLMs whose /metrics it reads.
OTHER_MEANING = {("exporter", "--target")}


@pytest.fixture
def nothing_starts(monkeypatch):
    def started(*args, **kwargs):
        raise AssertionError("a bad SLO got as far as starting something")

    monkeypatch.setattr(stack, "up", started)  # the stack of run, capacity and experiment
    monkeypatch.setattr(subprocess, "Popen", started)  # any engine, router, Prometheus or Locust


@pytest.mark.parametrize("argv", [["run", "--slo", "nonsense"],
                                  ["capacity", "--slo", "ttft_p99_ms=500", "--slo", "nonsense"],
                                  ["tune", "--slo", "nonsense"]], ids=lambda argv: argv[0])
def test_a_bad_slo_is_refused_in_one_line_before_anything_starts(argv, tmp_path, capsys, nothing_starts):
    out = tmp_path / "runs"
    assert cli.main([*argv, "--out", str(out)]) == 2
    said = capsys.readouterr()
    assert said.out == f"loadwatch: error: --slo: {REFUSED}\n" and said.err == ""
    assert not out.exists()


def test_a_bad_slo_in_an_experiment_file_is_refused_with_its_line(tmp_path, capsys, nothing_starts):
    path = tmp_path / "trial.yaml"
    path.write_text("arms: {a: {}}\nworkloads: {w: {}}\nslo: [ttft_p99_ms=500, nonsense]\n")
    assert cli.main(["experiment", str(path), "--out", str(tmp_path / "runs")]) == 2
    said = capsys.readouterr()
    assert said.out == f"loadwatch: error: {path}:3: slo.1: {REFUSED}\n" and said.err == ""
    assert not (tmp_path / "runs").exists()


def test_locusts_own_slo_option_refuses_a_bad_one_with_the_same_words():
    said = io.StringIO()
    with contextlib.redirect_stderr(said), pytest.raises(SystemExit) as exit_info:
        get_parser(default_config_files=[]).parse_args(["-f", "chat.py", "--slo", "nonsense"])
    assert exit_info.value.code == 2
    assert said.getvalue().splitlines()[-1].endswith(f"argument --slo: {REFUSED}")


def offered_by_commands() -> dict[str, dict[str, str | None]]:
    """option -> {command: its help} over every command of `loadwatch`."""
    found: dict[str, dict[str, str | None]] = {}
    top = cli.parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, parser in commands.items():
        for action in parser._actions:
            for flag in action.option_strings:
                if (name, flag) not in OTHER_MEANING:
                    found.setdefault(flag, {})[name] = action.help
    return found


OFFERED = offered_by_commands()


@pytest.mark.parametrize("flag", SHARED)
def test_a_shared_option_has_one_help_text_wherever_it_is_offered(flag):
    helps = OFFERED[flag]
    assert set(helps) == SHARED[flag]
    assert len(set(helps.values())) == 1, helps


def test_the_shared_options_help_is_their_models():
    for name, field in SharedOptions.model_fields.items():
        said = next(iter(OFFERED[f"--{name}"].values()))
        assert said in (field.description, f"{field.description} (default {field.default})"), said
