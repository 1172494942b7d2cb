"""The dashboards against Grafana's own models: grafana-foundation-sdk 1769699241, the build Grafana generates
from its schemas for Grafana "next", whose dashboard schema is version 41 (the version our dashboards
declare; Grafana 12, the image docker-compose.yml runs, reads it as it is). Every panel goes through the
model of its type (timeseries, stat, table, heatmap), its options and custom field config through that
plugin's own models, every query through the Prometheus query model; an unknown key, a value of the wrong
type, an enum value Grafana does not have or a missing required field fails (grafana_models.py says how).
"""

from __future__ import annotations

import copy

import pytest
from grafana_foundation_sdk.models import dashboard as models

from loadwatch.grafana.panels import SCHEMA_VERSION
from tests.dashboard_queries import DASHBOARDS as FILES
from tests.dashboard_queries import load
from tests.unit.grafana.grafana_models import problems


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_grafanas_models_accept_every_dashboard(path):
    assert problems(load(path)) == []


def test_the_models_are_of_the_schema_version_the_dashboards_declare():
    """A newer SDK pinned in pyproject.toml moves this: then the dashboards move to its schema too."""
    assert models.Dashboard().schema_version == SCHEMA_VERSION == 41
    assert {load(path)["schemaVersion"] for path in FILES} == {SCHEMA_VERSION}


def _panel(dashboard: dict, kind: str) -> dict:
    return next(p for p in dashboard["panels"] if p["type"] == kind)


def _curvy(d):
    _panel(d, "timeseries")["fieldConfig"]["defaults"]["custom"]["lineInterpolation"] = "curvy"


def _unknown_panel_field(d):
    _panel(d, "timeseries")["colour"] = "red"


def _legend_shown_as_text(d):
    _panel(d, "timeseries")["options"]["legend"]["showLegend"] = "yes"


def _stat_in_rainbow(d):
    _panel(d, "stat")["options"]["colorMode"] = "rainbow"


def _table_with_a_legend(d):
    _panel(d, "table")["options"]["legend"] = {"displayMode": "list", "placement": "bottom", "showLegend": True}


def _table_without_its_header_option(d):
    del _panel(d, "table")["options"]["showHeader"]


def _query_misspelt(d):
    target = _panel(d, "timeseries")["targets"][0]
    target["exprr"] = target.pop("expr")


def _width_as_text(d):
    _panel(d, "heatmap")["gridPos"]["w"] = "12"


def _tooltip_shared_by_name(d):
    d["graphTooltip"] = "shared"


def _angular_graph_panel(d):
    _panel(d, "timeseries")["type"] = "graph"  # gone in Grafana 12, with Angular


def _definition_as_list(d):
    d["templating"]["list"][1]["definition"] = ["label_values(up, model)"]


CORRUPTIONS = [
    (_curvy, ".fieldConfig.defaults.custom.lineInterpolation: Input should be 'linear', 'smooth', 'stepBefore' "
             "or 'stepAfter', not \"curvy\""),
    (_unknown_panel_field, ".colour: not a field of dashboard.Panel"),
    (_legend_shown_as_text, ".options.legend.showLegend: Input should be a valid boolean"),
    (_stat_in_rainbow, ".options.colorMode: Input should be 'value', 'background', 'background_solid' or 'none'"),
    (_table_with_a_legend, ".options.legend: not a field of table.Options"),
    (_table_without_its_header_option, ".options.showHeader: required by table.Options, missing"),
    (_query_misspelt, ".targets[0].exprr: not a field of prometheus.Dataquery",
                      ".targets[0].expr: required by prometheus.Dataquery, missing"),
    (_width_as_text, ".gridPos.w: Input should be a valid integer"),
    (_tooltip_shared_by_name, "dashboard.graphTooltip: Input should be 0, 1 or 2"),
    (_angular_graph_panel, '.type: "graph" is no panel plugin the SDK has a model of'),
    (_definition_as_list, "dashboard.templating.list[1].definition: Input should be a valid string"),
]


@pytest.mark.parametrize(("corrupt", "expected"), [(c, expected) for c, *expected in CORRUPTIONS],
                         ids=[c.__name__.strip("_") for c, *_ in CORRUPTIONS])
def test_a_dashboard_grafana_would_reject_or_ignore_in_part_fails(corrupt, expected):
    """The same check, fed a corrupted copy of the overview, names what is wrong and where."""
    broken = copy.deepcopy(load(FILES[-1]))
    assert FILES[-1].name == "overview.json"
    corrupt(broken)
    found = problems(broken)
    assert len(found) == len(expected) and all(e in f for e, f in zip(expected, found, strict=True)), found
