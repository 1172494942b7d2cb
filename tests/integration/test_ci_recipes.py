"""The CI recipes of docs/ci pass the linters their users run: actionlint for the GitHub Actions
workflow, GitLab's own schema (bundled with check-jsonschema) for the GitLab job; and the commands
they run are ones loadwatch's parser takes."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadwatch import cli
from tests.conftest import REPO

RECIPES = REPO / "docs" / "ci"
BIN = Path(sys.executable).parent
REDIRECTION = re.compile(r"^\d*(>|<|>>)")  # `> file`, `2>&1`: the shell's, not the command's


def test_the_github_workflow_passes_actionlint():
    actionlint = shutil.which("actionlint", path=str(BIN)) or shutil.which("actionlint")
    assert actionlint, "actionlint is missing: `make setup` installs it (pyproject's test extras)"
    linted = subprocess.run([actionlint, "-no-color", str(RECIPES / "github-actions.yml")], capture_output=True,
                            text=True, timeout=60)
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_gitlab_job_passes_gitlabs_schema():
    checked = subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.gitlab-ci",
                              str(RECIPES / "gitlab-ci.yml")], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def loadwatch_lines(script: str) -> list[list[str]]:
    """Each `loadwatch ...` command of a shell script, as its words (a `$(...)` left as one word), up to
    the end of its command: a list's or a pipeline's operator, or a redirection."""
    words = [shlex.split(line.replace('"$(loadwatch locustfile)"', "LOCUSTFILE"), posix=True)
             for line in script.replace("\\\n", " ").splitlines() if line.strip()]
    out = []
    for line in words:
        while "loadwatch" in line:
            line = line[line.index("loadwatch") + 1:]
            command: list[str] = []
            while line and line[0] not in ("||", "&&", ";", "|", "fi") and not REDIRECTION.match(line[0]):
                word, line = line[0], line[1:]
                command.append(word.rstrip(";"))
                if word.endswith(";"):
                    break
            out.append(command)
    return out


@pytest.mark.parametrize("recipe", ["github-actions.yml", "gitlab-ci.yml"])
def test_each_loadwatch_command_of_a_recipe_parses(recipe):
    doc = yaml.safe_load((RECIPES / recipe).read_text())
    scripts = [step.get("run", "") for job in doc.get("jobs", {}).values() for step in job["steps"]] + \
        [line for key, job in doc.items() if isinstance(job, dict) and "script" in job for line in job["script"]]
    commands = [c for script in scripts for c in loadwatch_lines(script) if c and c[0] != "locustfile"]
    assert {c[0] for c in commands} >= {"compare", "history"}, commands
    parser = cli.parser()
    for command in commands:
        parser.parse_args([w if "$" not in w else "X" for w in command])
