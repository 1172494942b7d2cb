"""Every dashboard query and variable selector parses as promtool parses it."""

import subprocess

import pytest
import yaml

from tests.dashboard_queries import queries, variable_selectors

pytestmark = pytest.mark.needs("promtool")


def test_every_query_passes_promtool(tmp_path):
    exprs = [expr for _, expr in queries()] + [sel for _, sel in variable_selectors()]
    rules = {"groups": [{"name": "dashboard-queries", "rules": [
        {"record": f"dashboard:query_{i}:check", "expr": expr} for i, expr in enumerate(exprs)]}]}
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump(rules))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{len(exprs)} rules found" in check.stdout
