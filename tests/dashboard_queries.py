"""Every PromQL query of the dashboards, with Grafana's variables replaced as Grafana would."""

from __future__ import annotations

import json
import re

from tests.conftest import REPO

DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
# "All" of every variable is .*, which also matches the empty label of a series outside Kubernetes.
VALUES = {"$__rate_interval": "30s", "$model": ".*", "$scenario": ".*", "$target": ".*", "$namespace": ".*",
          "$pod": ".*"}


def substitute(expr: str) -> str:
    for name, value in VALUES.items():
        expr = expr.replace(name, value)
    return expr


def load(path) -> dict:
    return json.loads(path.read_text())


def panels(dashboard: dict) -> list[dict]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def queries() -> list[tuple[str, str]]:
    """(where, expr) of every panel target and Prometheus annotation, variables substituted."""
    out = []
    for path in DASHBOARDS:
        dashboard = load(path)
        for panel in panels(dashboard):
            for target in panel["targets"]:
                out.append((f"{path.name}: {panel['title']} {target['refId']}", substitute(target["expr"])))
        for annotation in dashboard["annotations"]["list"]:
            if "expr" in annotation:
                out.append((f"{path.name}: annotation {annotation['name']}", substitute(annotation["expr"])))
    return out


def variable_selectors() -> list[tuple[str, str]]:
    """The series selector inside each `label_values(selector, label)` variable query."""
    out = []
    for path in DASHBOARDS:
        for var in load(path)["templating"]["list"]:
            if var["type"] == "query":
                match = re.fullmatch(r"label_values\((.+), (\w+)\)", var["definition"])
                assert match, var["definition"]
                out.append((f"{path.name}: ${var['name']}", substitute(match.group(1))))
    return out
