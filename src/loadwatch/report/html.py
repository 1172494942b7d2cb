"""report.html: one self-contained, interactive page of a run, opened offline in any browser.

Drawn with Bokeh, its script inlined (about 1.3 MB, against Plotly's 4.8 MB): charts that share one
time axis (zoom one, the others follow), hover, and legends whose entries toggle their series.
Client series come from the per-request records, the engine's from the run's Prometheus data.
"""

from __future__ import annotations

import base64
import html
import math
import re
from pathlib import Path
from typing import NamedTuple

import markdown
import numpy as np
from bokeh.embed import file_html
from bokeh.layouts import column, row
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.models.annotations import Label, Span
from bokeh.models.widgets import Div
from bokeh.plotting import figure
from bokeh.resources import INLINE

from loadwatch.atomic import write_atomically
from loadwatch.catalogue import Client, Engine
from loadwatch.metrics.results import Results
from loadwatch.metrics.ttft_split import NAMES, cause, measured, medians
from loadwatch.prometheus import PrometheusAPI, PrometheusError

PAGE = "report.html"
BINS = 200  # windows over the run, at least a second each
MAX_POINTS = 20_000  # requests drawn in the scatter; beyond, the slowest 1 % and a uniform sample of the rest
WIDTH, HEIGHT = 1100, 240
ENGINE_SERIES = {  # name -> (PromQL, scale, chart)
    "running": (f"sum({Engine.REQUESTS_RUNNING})", 1, "queue"),
    "waiting": (f"sum({Engine.REQUESTS_WAITING})", 1, "queue"),
    "KV cache usage (%)": (f"max({Engine.KV_CACHE_USAGE})", 100, "kv"),
    "KV cache peak (%)": (f"max({Engine.KV_CACHE_USAGE_MAX})", 100, "kv"),
    "prefix-cache hits (%)": (f"max({Engine.PREFIX_CACHE_HIT_RATIO})", 100, "ratios"),
    "spec-decode acceptance (%)": (f"max({Engine.SPEC_ACCEPTANCE_RATIO})", 100, "ratios"),
}
ENGINE_CHARTS = (("queue", "Engine: requests running and waiting", "requests"),
                 ("kv", "Engine: KV cache usage (%)", "%"),
                 ("ratios", "Engine: prefix-cache hits and spec-decode acceptance (%)", "%"))
CLIENT_SERIES = {"users": f"sum({Client.USERS})", "in flight": f"sum({Client.IN_FLIGHT})"}
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _groups(times: np.ndarray, edges: np.ndarray) -> list[np.ndarray]:
    """The indices of `times` in each window between consecutive `edges`."""
    index = np.searchsorted(edges, times, side="right") - 1
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(len(edges)))
    return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def client_over_time(records: list[dict], start: float, end: float) -> dict:
    """Per window of the run, over the requests that finished in it: TTFT, TPOT and ITL p50 and p99
    (ms), output tokens/s, and failures/s by reason. Windows without a request are gaps, not zeros."""
    seconds = max(1.0, math.ceil((end - start) / BINS))
    edges = np.arange(start, end + 2 * seconds, seconds)
    done = measured(records)
    groups = _groups(np.array([r["start"] + r["elapsed_s"] for r in done]), edges)
    out: dict = {"t": list(edges[:-1] * 1000), "seconds": seconds}
    for metric, field in (("TTFT", "ttft_s"), ("TPOT", "tpot_s")):
        values = np.array([np.nan if r.get(field) is None else r[field] * 1000 for r in done])
        for q in (50, 99):
            out[f"{metric} p{q}"] = [_quantile(values[g], q) for g in groups]
    if any(r.get("itl_s") for r in done):
        gaps = [np.array([gap * 1000 for i in g for gap in done[i].get("itl_s") or ()]) for g in groups]
        for q in (50, 99):
            out[f"ITL p{q}"] = [_quantile(v, q) for v in gaps]
    tokens = np.array([r.get("output_tokens") or 0 for r in done])
    out["output tok/s"] = [float(tokens[g].sum()) / seconds for g in groups]
    failed = [r for r in records if r["stage"] != "warmup" and r["failure"] is not None]
    out["failures"] = {}
    for reason in sorted({r["failure"] for r in failed}):
        at = np.array([r["start"] + r["elapsed_s"] for r in failed if r["failure"] == reason])
        out["failures"][reason] = [len(g) / seconds for g in _groups(at, edges)]
    return out


def _quantile(values: np.ndarray, q: float) -> float:
    values = values[~np.isnan(values)] if len(values) else values
    return float(np.percentile(values, q)) if len(values) else float("nan")


def scatter_points(records: list[dict]) -> tuple[dict, str]:
    """TTFT against send time, each point with its id and the part of its TTFT furthest above the
    median; a large run keeps its slowest 1 % and a uniform sample of the rest, and says so."""
    done = measured(records)
    typical = medians(done)
    shown, note = done, f"all {len(done):,} measured requests"
    if len(done) > MAX_POINTS:
        ordered = sorted(done, key=lambda r: r["ttft_s"], reverse=True)
        slowest = ordered[:max(1, len(done) // 100)]
        rest = ordered[len(slowest):]
        step = len(rest) / (MAX_POINTS - len(slowest))
        shown = slowest + [rest[int(i * step)] for i in range(MAX_POINTS - len(slowest))]
        note = (f"{len(shown):,} of {len(done):,} measured requests: all of the slowest 1 % and a uniform sample of "
                "the rest")
    causes = [cause(r, typical, ttft_only=True) for r in shown]
    return {"t": [r["start"] * 1000 for r in shown], "ttft": [r["ttft_s"] * 1000 for r in shown],
            "e2e": [r["elapsed_s"] * 1000 for r in shown], "id": [r["id"] for r in shown],
            "scenario": [r["scenario"] for r in shown],
            "cause": [f"{NAMES[p]}: {s * 1000:.1f} ms (median {m * 1000:.1f} ms)" for p, s, m in causes]}, note


def engine_over_time(api: PrometheusAPI, start: float, end: float) -> dict[str, tuple[list, list]]:
    """The engine's and the load's gauges over the run, from Prometheus: name -> (ms times, values)."""
    step = max(1.0, (end - start) / BINS)
    out = {}
    queries = {**{name: (expr, scale) for name, (expr, scale, _chart) in ENGINE_SERIES.items()},
               **{name: (expr, 1) for name, expr in CLIENT_SERIES.items()}}
    for name, (expr, scale) in queries.items():
        result = api.query_range(expr, start, end, step)
        points = [(float(t) * 1000, float(v) * scale) for t, v in result[0]["values"] if v != "NaN"] if result else []
        out[name] = ([t for t, _ in points], [v for _, v in points])
    return out


def _chart(title: str, y_label: str, x_range=None, y_log: bool = False):
    options = {"x_range": x_range} if x_range is not None else {}
    chart = figure(title=title, x_axis_type="datetime", width=WIDTH, height=HEIGHT, y_axis_label=y_label,
                   tools="xpan,xwheel_zoom,box_zoom,reset,save", y_axis_type="log" if y_log else "linear", **options)
    chart.add_tools(HoverTool(tooltips=[("", "$name"), ("time", "$x{%H:%M:%S}"), ("value", "$y{0,0.0}")],
                              formatters={"$x": "datetime"}))
    return chart


def _lines(chart, series: dict[str, tuple[list, list]]) -> None:
    for i, (name, (xs, ys)) in enumerate(series.items()):
        chart.line(xs, ys, legend_label=name, name=name, color=COLOURS[i % len(COLOURS)], line_width=2)
    if series:
        chart.legend.click_policy = "hide"  # a legend entry toggles its series
        chart.legend.location = "top_left"


def _stages(chart, stages, top: bool) -> None:
    for stage in stages:
        chart.add_layout(Span(location=stage.start * 1000, dimension="height", line_dash="dashed", line_color="grey"))
        if top:
            chart.add_layout(Label(x=stage.start * 1000, y=HEIGHT - 60, y_units="screen", text=stage.name,
                                   text_font_size="9pt", text_color="grey", x_offset=3))


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='lw'><tr>{head}</tr>{body}</table>"


def _ms(value) -> str:
    return "n/a" if value is None else f"{value:,.1f} ms"


def _summary(report: dict) -> str:
    c = report["client"]
    rows = [[name, _ms(c.get(f"mean_{key}_ms")), _ms(c.get(f"median_{key}_ms")), _ms(c.get(f"p99_{key}_ms"))]
            for name, key in (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2el"))]
    figures = _table(["requests", "failed", "req/s", "output tok/s", "goodput req/s"], [[
        f"{c['completed']:,}", f"{c['failed']:,}", f"{c['request_throughput'] or 0:.2f}",
        f"{c['output_throughput'] or 0:.1f}", f"{c['request_goodput'] or 0:.2f}"]])
    slo = _table(["SLO", "limit", "measured", "verdict"], [
        [s["name"], f"{s['limit']:g}", "n/a" if s["measured"] is None else f"{s['measured']:.4g}",
         "met" if s["passed"] else "BROKEN"] for s in report["slo"]]) if report["slo"] else "<p>No SLO was set.</p>"
    return figures + _table(["latency", "mean", "median", "p99"], rows) + slo


def time_charts(records: list[dict] | None, api: PrometheusAPI | None, start: float, end: float, marks: list,
                notes: list[str]) -> list:
    """Client latency, throughput and failures from the records, then the load and the engine from
    Prometheus, on one shared time axis, each mark (stage, level) a dashed line; what could not be
    read is added to `notes`."""
    engine: dict = {}
    if api is not None:
        try:
            engine = engine_over_time(api, start, end)
        except PrometheusError as exc:
            notes.append(f"The engine's charts are missing: {exc}.")
    charts = []
    if records:
        over = client_over_time(records, start, end)
        ttft = _chart(f"Client TTFT, p50 and p99 of the requests finishing in each {over['seconds']:g} s (ms)", "ms")
        _lines(ttft, {k: (over["t"], over[k]) for k in ("TTFT p50", "TTFT p99")})
        tokens = _chart("Client TPOT and ITL, p50 and p99 (ms)", "ms", ttft.x_range)
        _lines(tokens, {k: (over["t"], over[k]) for k in ("TPOT p50", "TPOT p99", "ITL p50", "ITL p99") if k in over})
        throughput = _chart("Output tokens/s", "tok/s", ttft.x_range)
        _lines(throughput, {"output tok/s": (over["t"], over["output tok/s"])})
        failures = _chart("Failures/s by reason", "per s", ttft.x_range)
        _lines(failures, {reason: (over["t"], v) for reason, v in over["failures"].items()})
        if not over["failures"]:
            failures.add_layout(Label(x=10, y=HEIGHT / 2 - 30, x_units="screen", y_units="screen", text="no failure"))
        charts += [ttft, tokens, throughput, failures]
    x_range = charts[0].x_range if charts else None
    groups = [("Users and requests in flight", "count", list(CLIENT_SERIES)),
              *((title, unit, [n for n, (_e, _s, c) in ENGINE_SERIES.items() if c == key])
                for key, title, unit in ENGINE_CHARTS)]
    for title, unit, names in groups:
        lines = {n: engine[n] for n in names if engine.get(n, ([], []))[0]}
        if lines:
            chart = _chart(title, unit, x_range)
            _lines(chart, lines)
            charts.append(chart)
            x_range = x_range or chart.x_range
    for i, chart in enumerate(charts):
        _stages(chart, marks, top=i == 0)
    return charts


def write_run_page(report: dict, results: Results, records: list[dict] | None, api: PrometheusAPI | None,
                   out_dir: Path) -> Path:
    """report.html beside report.md, from what the report already read."""
    w = report["window"]
    notes = [*report["notes"], *([report["engine_missing"]] if report.get("engine_missing") else [])]
    charts = time_charts(records, None if report.get("engine_missing") else api, results.started_at,
                         results.ended_at, list(results.stages), notes)
    if records:
        points, note = scatter_points(records)
        scatter = _chart(f"Each request's TTFT against when it was sent ({note}); hover for its id and cause", "ms",
                         charts[0].x_range if charts else None, y_log=True)
        scatter.scatter("t", "ttft", source=ColumnDataSource(points), size=4, alpha=0.5, name="request")
        scatter.add_tools(HoverTool(tooltips=[("id", "@id"), ("scenario", "@scenario"), ("TTFT", "@ttft{0,0.0} ms"),
                                              ("E2E", "@e2e{0,0.0} ms"), ("cause", "@cause")]))
        charts += [scatter, *distributions(records)]
    charts.append(Div(text="<h2>Settings</h2>" + _table(["option", "value"], [
        [k, "" if v is None else str(v)] for k, v in sorted(results.options.items())]), width=WIDTH))
    body = (f"<h1>loadwatch report: run {html.escape(report['run_id'])}</h1>"
            f"<p>Target {html.escape(report['target'] or 'n/a')}, {w['start_utc']} to {w['end_utc']} (UTC). Drag to "
            "pan, scroll to zoom (every chart follows), click a legend entry to hide its series.</p>"
            + _summary(report) + "".join(f"<p class='note'>{html.escape(n, quote=False)}</p>" for n in notes))
    return write_page(out_dir / PAGE, f"loadwatch report {report['run_id']}", body, charts)


def distributions(records: list[dict]) -> list:
    """Histograms of TTFT, TPOT and E2E over the measured requests."""
    done = measured(records)
    charts = []
    for name, field in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "elapsed_s")):
        values = np.array([r[field] * 1000 for r in done if r.get(field) is not None])
        if not len(values):
            continue
        counts, edges = np.histogram(values, bins=60, range=(0, float(np.percentile(values, 99.9)) or 1.0))
        chart = figure(title=f"{name} distribution (ms), up to its 99.9th percentile", width=WIDTH // 3,
                       height=HEIGHT, tools="xpan,xwheel_zoom,reset,save", x_axis_label="ms", y_axis_label="requests")
        chart.quad(top=counts, bottom=0, left=edges[:-1], right=edges[1:], fill_alpha=0.6)
        charts.append(chart)
    return [row(*charts)] if charts else []


STYLE = ("<style>table{border-collapse:collapse;margin:8px 0}td,th{padding:2px 12px 2px 0;text-align:left}"
         "p.note{color:#a15c00}body{font-family:sans-serif}</style>")


class Mark(NamedTuple):
    """A dashed line across the time charts: a stage, a capacity level."""

    name: str
    start: float


def markdown_html(text: str, folder: Path) -> str:
    """A report's Markdown as HTML (python-markdown, with its tables), each image of `folder` inlined
    as a data URI so that the page needs no file beside it."""
    def inline(match: re.Match) -> str:
        path = folder / match.group(1)
        if path.suffix == ".png" and path.is_file():
            return f'src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}"'
        return match.group(0)
    return re.sub(r'src="([^":]+)"', inline, markdown.markdown(text, extensions=["tables"]))


def write_page(path: Path, title: str, body: str, charts: list | None = None) -> Path:
    """A page of HTML, with Bokeh charts under it (their script inlined) where there are any."""
    if charts:
        text = file_html(column(Div(text=STYLE + body, width=WIDTH), *charts), INLINE, title=title)
    else:
        text = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                f"{STYLE}</head><body>{body}</body></html>")
    write_atomically(path, text)
    return path


def capacity_charts(result: dict, records: list[dict], api: PrometheusAPI | None, start: float,
                    end: float) -> list:
    """The capacity curve with the knee and operating point, then the search over time: client latency
    and throughput from the levels' records, the engine from Prometheus, each level marked."""
    levels = sorted(result["levels"], key=lambda lv: lv["level"])
    x = [lv["level"] for lv in levels]
    curve = figure(title="Latency against load (ms), with the knee and the operating point", width=WIDTH,
                   height=HEIGHT + 60, y_axis_type="log", x_axis_label=f"load ({result['unit']})", y_axis_label="ms",
                   tools="pan,wheel_zoom,box_zoom,reset,save,hover")
    for i, (key, label) in enumerate((("median_ttft_ms", "TTFT p50"), ("p99_ttft_ms", "TTFT p99"),
                                      ("p99_tpot_ms", "TPOT p99"))):
        ys = [lv["client"][key] for lv in levels]
        curve.line(x, ys, legend_label=label, color=COLOURS[i], line_width=2)
        curve.scatter(x, ys, color=COLOURS[i], size=7, legend_label=label)
    curve.legend.click_policy = "hide"
    for value, label, colour in ((result["max_sustainable"], "knee", "red"),
                                 (result["recommended"], "operating point", "green")):
        if value is not None:
            curve.add_layout(Span(location=value, dimension="height", line_dash="dashed", line_color=colour))
            curve.add_layout(Label(x=value, y=10, y_units="screen", text=f"{label} {value:g}", text_color=colour,
                                   text_font_size="9pt", x_offset=3))
    throughput = figure(title="Output tokens/s against load", width=WIDTH, height=HEIGHT, x_range=curve.x_range,
                        x_axis_label=f"load ({result['unit']})", tools="pan,wheel_zoom,box_zoom,reset,save,hover")
    throughput.line(x, [lv["client"]["output_throughput"] for lv in levels], color=COLOURS[2], line_width=2)
    charts: list = [curve, throughput]
    marks = [Mark(lv["name"], lv["start"]) for lv in sorted(result["levels"], key=lambda lv: lv["start"])
             if lv["start"]]
    charts += time_charts(records, api, start, end, marks, [])
    return charts

