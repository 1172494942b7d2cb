"""The shell blocks of the docs' pages, as a reader copies them: tests/unit/test_docs_commands.py parses
every command, and tests/e2e/test_recipes.py runs the recipes of the main paths as written."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SHELL = {"", "sh", "bash", "shell", "console"}
FENCE = re.compile(r"^\s*```(\w*)")
ELSEWHERE = re.compile(r"<!--\s*elsewhere:\s*(.+?)\s*-->")


@dataclass
class Block:
    elsewhere: str | None  # the block's `elsewhere` mark: where its commands run, when not here
    commands: list[tuple[int, str]] = field(default_factory=list)  # (line number, command), continuations joined


def blocks(path: Path) -> list[Block]:
    """Every shell block of a page, in order."""
    out: list[Block] = []
    lang: str | None = None
    pending, start, previous = "", 0, ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            if lang is None and fence.group(1) in SHELL:
                mark = ELSEWHERE.search(previous)
                out.append(Block(mark.group(1) if mark else None))
            lang = None if lang is not None else fence.group(1)
            continue
        previous = line if line.strip() else previous
        if lang is None or lang not in SHELL:
            continue
        text = line.strip()
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        command, pending = pending + text, ""
        if command and not command.startswith("#"):
            out[-1].commands.append((start, command))
    return out


def shell_lines(path: Path) -> list[tuple[int, str, str | None]]:
    """(line number, command, where else it runs) of every shell block's commands."""
    return [(number, command, block.elsewhere) for block in blocks(path) for number, command in block.commands]


def recipe(path: Path, first: str) -> list[str]:
    """The commands of the block of `path` whose first command starts with `first`, as written."""
    found = [b for b in blocks(path) if b.commands and b.commands[0][1].startswith(first)]
    assert len(found) == 1, f"{path.name}: {len(found)} blocks start with {first!r}"
    return [command for _number, command in found[0].commands]
