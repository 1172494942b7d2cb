"""Every `loadwatch`, `locust` and `make` command in the docs' shell blocks parses with the real parser:
loadwatch's own (and the models its commands validate their options with), Locust's with loadwatch's
options on it, and the Makefile's targets and variables. A renamed option fails here, naming the page.

A shell block is a fenced block marked sh, bash, shell or console, or one with no language. What a
page shows as a pattern rather than a command sits in a `text` block. A block whose commands need what
this machine does not have (your own server, a cluster, several hosts) is marked in the page's source,
on the line before it: `<!-- elsewhere: your own server -->`. Its commands are parsed all the same, and
listed (`pytest -s`); every other command runs here, on the embedded engine or the test server.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex

import pytest
from locust.argument_parser import get_parser

import loadwatch.loadgen  # noqa: F401  registers the plugin that adds loadwatch's options to Locust's parser
from loadwatch.capacity.options import CapacityOptions
from loadwatch.cli import parser
from loadwatch.fleet.options import FleetOptions
from loadwatch.model_options import model_from_args
from loadwatch.settings import LoadSettings
from loadwatch.shared_options import SharedOptions
from loadwatch.tune.options import TuneOptions
from tests.conftest import REPO
from tests.docs_blocks import shell_lines

PAGES = [p for p in sorted((REPO / "docs").rglob("*.md")) if "reference" not in p.parts] + [REPO / "README.md"]
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PLACEHOLDER = re.compile(r"<[^<>\s][^<>]*>")
ASSIGNMENTS = re.compile(r"^(\s*[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")
REMOTE = re.compile(r"https?://(?!127\.0\.0\.1|localhost)[A-Za-z0-9.-]+")  # a host that is not this machine
NOT_HERE = ("kubectl", "docker", "ssh")  # programs whose commands reach a cluster, a container engine, a host


def commands() -> list[tuple[str, str, list[str]]]:
    """(where, program, its arguments) of each loadwatch, locust and make command."""
    found = []
    for path in PAGES:
        for number, line, _elsewhere in shell_lines(path):
            line = PLACEHOLDER.sub("PLACEHOLDER", line)  # runs/<time>: a value to fill in, not a redirection
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            tokens, parts = list(lexer), [[]]
            for token in tokens:  # a pipeline's or a list's commands, each apart
                if token in ("&&", "||", ";", "|", "&", ">", ">>", "<", "(", ")"):
                    parts.append([])
                else:
                    parts[-1].append(token)
            for words in parts:
                make_vars = []
                while words and ASSIGNMENT.match(words[0]):
                    make_vars.append(words.pop(0).split("=")[0])
                if not words:
                    continue
                program = words[0].rsplit("/", 1)[-1]
                if program == "kubectl" and "exec" in words and "--" in words:  # a command run in a pod
                    words = words[words.index("--") + 1:]
                    program = words[0].rsplit("/", 1)[-1] if words else ""
                if program in ("loadwatch", "locust", "make"):
                    where = f"{path.relative_to(REPO)}:{number}"
                    found.append((where, program, words[1:] + [f"VAR:{v}" for v in make_vars]))
    return found


COMMANDS = commands()


def parsed(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
        try:
            return parser.parse_args(argv)
        except SystemExit:
            pass
    raise AssertionError(said.getvalue().strip().splitlines()[-1])


# Built once, at collection: Locust's own parser with loadwatch's options as its plugin adds them (no
# locust.conf read), and loadwatch's.
LOCUST = get_parser(default_config_files=[])
LOADWATCH = parser()


def check_locust(argv: list[str]) -> None:
    args = parsed(LOCUST, argv)
    LoadSettings.model_validate({k: v for k, v in vars(args).items() if k in LoadSettings.model_fields
                                 and v is not None})


def check_loadwatch(argv: list[str]) -> None:
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parsed(LOADWATCH, argv[:cut])
    for model in (CapacityOptions, FleetOptions, TuneOptions):
        # A command takes the model where it has its options (a fleet's: an embedded one's at least).
        if all(hasattr(args, name) for name in getattr(model, "EMBEDDED", model.model_fields)):
            model_from_args(model, args)  # as the command validates them: ValueError names the option
    if hasattr(args, "locustfile") or args.command == "up":  # the commands that take shared options (an SLO)
        model_from_args(SharedOptions, args)
    if argv[cut + 1:] and args.command in ("run", "capacity", "tune", "experiment"):
        check_locust(["-f", "locustfiles/chat.py", *argv[cut + 1:]])


def check_make(argv: list[str]) -> None:
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    variables = set(re.findall(r"^([A-Z_]+)\s*\??=", makefile, re.M))
    for word in argv:
        if word.startswith("VAR:"):  # a Makefile variable, or the environment of what make runs (loadwatch's)
            name = word[4:]
            assert name in variables or (name.startswith("LOADWATCH_") and any(
                name in path.read_text() for path in (REPO / "src").rglob("*.py"))), \
                f"neither make nor loadwatch reads {name} (make has {', '.join(sorted(variables))})"
        else:
            assert word in targets, f"make has no target {word}"


def test_a_command_that_needs_another_machine_is_marked_and_listed():
    """Each command that names a host other than this machine, or runs kubectl, docker or ssh, sits in a
    block marked `elsewhere`; the list is printed (`pytest -s`): what a new user cannot try here."""
    unmarked, listed = [], []
    for path in PAGES:
        for number, line, elsewhere in shell_lines(path):
            where = f"{path.relative_to(REPO)}:{number}"
            said = ASSIGNMENTS.sub("", line.split(" #")[0])  # not its comment, nor a variable's value
            needs = REMOTE.search(said) or any(re.search(rf"(^|[;&|(]\s*){p}\s", said) for p in NOT_HERE)
            if elsewhere:
                listed.append(f"{where} ({elsewhere}): {line[:100]}")
            elif needs:
                unmarked.append(f"{where}: {line[:100]}")
    assert not unmarked, "mark these blocks <!-- elsewhere: WHAT IT NEEDS -->:\n" + "\n".join(unmarked)
    print("\nCommands that need another machine:\n" + "\n".join(listed))
    assert len(listed) > 10


CHECKS = {"locust": check_locust, "loadwatch": check_loadwatch, "make": check_make}


@pytest.mark.parametrize(("where", "program", "argv"), COMMANDS, ids=[f"{w} {p}" for w, p, _ in COMMANDS])
def test_the_docs_command_parses(where, program, argv):
    try:
        CHECKS[program](argv)
    except (AssertionError, ValueError) as exc:
        pytest.fail(f"{where}: `{program} {shlex.join(a for a in argv if not a.startswith('VAR:'))}`: {exc}")


def test_the_docs_show_commands_of_every_kind():
    assert {p for _, p, _ in COMMANDS} == {"loadwatch", "locust", "make"} and len(COMMANDS) > 40
