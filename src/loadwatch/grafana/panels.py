"""Grafana dashboard JSON built from a few helpers: one place for ids, grid positions and units.

Dashboards are generated (`python -m loadwatch.grafana`) into grafana/dashboards/, checked in, and a
test fails when the files drift from this code.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from loadwatch.metrics.definitions import HISTOGRAMS

DATASOURCE_UID = "loadwatch-prometheus"  # grafana/provisioning/datasources/prometheus.yaml
SCHEMA_VERSION = 41  # Grafana 12
DS = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"
# Panels that query these histograms' buckets show their exemplars: a spike leads to a request id.
EXEMPLARS = [h.name for h in HISTOGRAMS.values() if h.exemplars]


def quantile(q: float, metric: str, selector: str, by: str = "") -> str:
    """The q-quantile of a histogram over the rate interval, summed over everything but `by`."""
    group = ", ".join(["le", *([by] if by else [])])
    return f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{{{selector}}}[{RATE}])))"


def mean(metric: str, selector: str, by: str = "") -> str:
    group = f" by ({by})" if by else ""
    return (f"sum{group} (rate({metric}_sum{{{selector}}}[{RATE}])) / "
            f"sum{group} (rate({metric}_count{{{selector}}}[{RATE}]))")


def rate(metric: str, selector: str, by: str = "") -> str:
    group = f" by ({by})" if by else ""
    return f"sum{group} (rate({metric}{{{selector}}}[{RATE}]))"


# A panel's options where it gives none, as its plugin's Options model has them (timeseries.Options,
# table.Options): another plugin's options would be ignored.
OPTIONS: dict[str, dict] = {
    "timeseries": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []},
                   "tooltip": {"mode": "multi", "sort": "none"}},
    "table": {"showHeader": True, "frameIndex": 0, "cellHeight": "sm"},
}


@dataclass
class Panel:
    title: str
    targets: list[tuple[str, str]]  # (expr, legend)
    unit: str
    description: str = ""
    kind: str = "timeseries"
    width: int = 8
    height: int = 8
    max: float | None = None
    stack: bool = False
    options: dict = field(default_factory=dict)
    # (from value, colour) steps, lowest first with None: a stat's tiles coloured by where they stand
    thresholds: list[tuple[float | None, str]] | None = None

    def to_json(self, panel_id: int, x: int, y: int) -> dict:
        defaults: dict = {"unit": self.unit}
        if self.max is not None:
            defaults.update(min=0, max=self.max)
        if self.kind == "timeseries":
            defaults["custom"] = {"fillOpacity": 10 if not self.stack else 60, "showPoints": "never",
                                  "stacking": {"mode": "normal" if self.stack else "none"}}
        if self.thresholds:
            defaults["thresholds"] = {"mode": "absolute",
                                      "steps": [{"value": value, "color": colour} for value, colour in self.thresholds]}
        table = self.kind == "table"  # one row per series, its columns the queries' values at the range's end
        panel = {
            "id": panel_id,
            "type": self.kind,
            "title": self.title,
            "description": self.description,
            "datasource": DS,
            "gridPos": {"h": self.height, "w": self.width, "x": x, "y": y},
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": self.options or copy.deepcopy(OPTIONS[self.kind]),
            **({"transformations": [{"id": "merge", "options": {}}]} if table else {}),
            "targets": [
                {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend,
                 **({"format": "table", "instant": True, "range": False} if table else {"range": True}),
                 **({"format": "heatmap"} if self.kind == "heatmap" else {}),
                 **({"exemplar": True} if any(f"{name}_bucket" in expr for name in EXEMPLARS) else {})}
                for i, (expr, legend) in enumerate(self.targets)
            ],
        }
        return panel


@dataclass
class Row:
    title: str
    panels: list[Panel]


def variable(name: str, label: str, query: str, multi: bool = True) -> dict:
    return {
        "name": name, "label": label, "type": "query", "datasource": DS,
        "query": {"qryType": 1, "query": query, "refId": f"{name}-variable"}, "definition": query,
        "refresh": 2, "sort": 1, "multi": multi, "includeAll": True, "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": [], "hide": 0,
    }


DATASOURCE_VARIABLE = {
    "name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
    "current": {"selected": True, "text": "Prometheus", "value": DATASOURCE_UID}, "options": [], "hide": 0,
    "refresh": 1, "regex": "",
}


def dashboard(uid: str, title: str, description: str, rows: list[Row], variables: list[dict],
              annotations: list[dict]) -> dict:
    panels: list[dict] = []
    y = 0
    panel_id = 1
    for row in rows:
        panels.append({"id": panel_id, "type": "row", "title": row.title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        panel_id += 1
        y += 1
        x = 0
        row_height = 0
        for panel in row.panels:
            if x + panel.width > 24:
                x, y = 0, y + row_height
                row_height = 0
            panels.append(panel.to_json(panel_id, x, y))
            panel_id += 1
            x += panel.width
            row_height = max(row_height, panel.height)
        y += row_height
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["loadwatch", "vllm"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,  # a shared crosshair: client and engine panels read at the same instant
        "time": {"from": "now-30m", "to": "now"},
        "refresh": "10s",
        "timezone": "",
        "templating": {"list": [DATASOURCE_VARIABLE, *variables]},
        "annotations": {"list": [BUILTIN_ANNOTATION, RUN_ANNOTATIONS, *annotations]},
        "panels": panels,
        "links": [{"title": "loadwatch dashboards", "type": "dashboards", "tags": ["loadwatch"], "asDropdown": True,
                   "icon": "external link", "tooltip": "", "targetBlank": False, "includeVars": False,
                   "keepTime": False}],
    }


BUILTIN_ANNOTATION = {
    "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
    "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard",
}


RUN_ANNOTATIONS = {
    "name": "loadwatch runs", "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
    "iconColor": "rgba(138, 184, 255, 0.6)",
    "target": {"type": "tags", "tags": ["loadwatch"], "matchAny": False, "limit": 100},
}  # what `loadwatch annotate` posts


def prometheus_annotation(name: str, expr: str, title: str, text: str, tags: str, color: str) -> dict:
    """Regions drawn from Prometheus: one for each stretch of time a series of `expr` exists."""
    return {"name": name, "datasource": DS, "enable": True, "iconColor": color, "expr": expr, "step": "5s",
            "titleFormat": title, "textFormat": text, "tagKeys": tags, "useValueForTime": False}
