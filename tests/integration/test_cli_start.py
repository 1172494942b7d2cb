"""`loadwatch` parses every command without importing what the reports need (scipy, matplotlib,
bokeh: 3.3 s of each start when the report commands' parsers brought them in); the commands that
draw reports import them as they run."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("scipy", "matplotlib", "bokeh")


def test_the_whole_parser_is_built_without_the_reports_libraries():
    probe = ("import sys; from loadwatch.cli import parser; parser().parse_args(['compare', 'a', 'b']); "
             f"print(sorted({{m.partition('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout
