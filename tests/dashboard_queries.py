"""Every PromQL query of the dashboards, with Grafana's variables replaced as Grafana would."""

from __future__ import annotations

import json
import re

from tests.conftest import REPO

DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
# "All" of every variable is .*, which also matches the empty label of a series outside Kubernetes.
VALUES = {"$__rate_interval": "30s", "$model": ".*", "$scenario": ".*", "$target": ".*", "$namespace": ".*",
          "$pod": ".*", "$router": ".*"}
FLEET = ("fleet.json",)  # read by a fleet's run; the others by one engine's


def substitute(expr: str) -> str:
    for name, value in VALUES.items():
        expr = expr.replace(name, value)
    return expr


def load(path) -> dict:
    return json.loads(path.read_text())


def panels(dashboard: dict) -> list[dict]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def chosen(names: tuple[str, ...] | None, fleet: bool | None) -> list:
    return [p for p in DASHBOARDS if (names is None or p.name in names)
            and (fleet is None or (p.name in FLEET) == fleet)]


def queries(fleet: bool | None = None) -> list[tuple[str, str]]:
    """(where, expr) of every panel target and Prometheus annotation, variables substituted; of the
    fleet's dashboard alone, or of the others, or (None) of all."""
    out = []
    for path in chosen(None, fleet):
        dashboard = load(path)
        for panel in panels(dashboard):
            for target in panel["targets"]:
                out.append((f"{path.name}: {panel['title']} {target['refId']}", substitute(target["expr"])))
        for annotation in dashboard["annotations"]["list"]:
            if "expr" in annotation:
                out.append((f"{path.name}: annotation {annotation['name']}", substitute(annotation["expr"])))
    return out


def variable_selectors(fleet: bool | None = None) -> list[tuple[str, str]]:
    """The series selector inside each `label_values(selector, label)` variable query."""
    out = []
    for path in chosen(None, fleet):
        for var in load(path)["templating"]["list"]:
            if var["type"] == "query":
                match = re.fullmatch(r"label_values\((.+), (\w+)\)", var["definition"])
                assert match, var["definition"]
                out.append((f"{path.name}: ${var['name']}", substitute(match.group(1))))
    return out
