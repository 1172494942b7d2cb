"""The docs' reference pages are generated from the code (issue 42): a page out of step fails here,
and `make generate` rewrites it."""

from __future__ import annotations

import pytest

from loadwatch.reference.pages import PAGES
from loadwatch.settings import LoadSettings
from tests.conftest import REPO

REFERENCE = REPO / "docs" / "reference"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_reference_page_is_what_the_code_says(name):
    assert (REFERENCE / name).read_text() == PAGES[name](), f"docs/reference/{name} drifted: run `make generate`"


def test_every_loadsettings_field_is_in_the_options_reference_under_its_option_name():
    page = (REFERENCE / "options.md").read_text()
    for name in LoadSettings.model_fields:
        assert f"| `--{name.replace('_', '-')}` | `LOCUST_{name.upper()}` |" in page, name


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_row_of_a_reference_table_says_what_it_is(name):
    """A user reads a reference row for its description: an empty cell, or a default with nothing
    before it, says the code lacks a help text."""
    lines = (REFERENCE / name).read_text().splitlines()
    for number, (line, after) in enumerate(zip(lines, [*lines[1:], ""], strict=True), 1):
        if not line.startswith("|") or line.startswith("|---") or after.startswith("|---"):  # a header
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        assert all(cells) and not any(cell.lower().startswith("default") for cell in cells[1:]), \
            f"docs/reference/{name}:{number}: {line[:120]}"
