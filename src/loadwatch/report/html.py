"""report.html of a run and the charts of a capacity search's page: what each shows, from the
series of report.timeline drawn with report.page's parts."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
from bokeh.layouts import row
from bokeh.models import ColumnDataSource, HoverTool
from bokeh.models.annotations import Label, Span
from bokeh.models.widgets import Div
from bokeh.plotting import figure

from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.results import Results
from loadwatch.metrics.ttft_split import measured
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.markdown import MODEL_HEADER, load_generator_words, model_cells
from loadwatch.report.page import (
    COLOURS,
    HEIGHT,
    WIDTH,
    Mark,
    draw_lines,
    draw_marks,
    html_table,
    new_chart,
    write_page,
)
from loadwatch.report.scaling import fault_marks
from loadwatch.report.timeline import CLIENT_SERIES, ENGINE_SERIES, client_over_time, engine_over_time, scatter_points

PAGE = "report.html"
ENGINE_CHARTS = (("queue", "Engine: requests running, and waiting by reason", "requests"),
                 ("kv", "Engine: KV cache usage (%)", "%"),
                 ("ratios", "Engine: prompt tokens from cache, prefix-cache hits, spec-decode acceptance (%)", "%"))


def _ms(value) -> str:
    return "n/a" if value is None else f"{value:,.1f} ms"


def _summary(report: dict) -> str:
    c = report["client"]
    rows = [[name, _ms(c.get(f"mean_{key}_ms")), _ms(c.get(f"median_{key}_ms")), _ms(c.get(f"p99_{key}_ms"))]
            for name, key in (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2el"))]
    figures = html_table(["requests", "failed", "rejected", "req/s", "output tok/s", "goodput req/s"], [[
        f"{c['completed']:,}", f"{c['failed']:,}", f"{c.get('rejected') or 0:,}", f"{c['request_throughput'] or 0:.2f}",
        f"{c['output_throughput'] or 0:.1f}", f"{c['request_goodput'] or 0:.2f}"]])
    slo = html_table(["SLO", "limit", "measured", "verdict"], [
        [s["name"], f"{s['limit']:g}", "n/a" if s["measured"] is None else f"{s['measured']:.4g}",
         "met" if s["passed"] else "BROKEN"] for s in report["slo"]]) if report["slo"] else "<p>No SLO was set.</p>"
    # The load generator's own account (each process's share of a core, an open loop's schedule), as report.md says it.
    load_generator = "".join(f"<p>{html.escape(words, quote=False)}</p>"
                             for words in load_generator_words(report.get("load_generator") or {}))
    cost = html_table(["$ an hour", "$ per 1M output tokens", "$ per 1M total tokens"], [[
        f"{c['price_per_hour']:g}", f"{c['cost_per_million_output_tokens'] or 0:.4g}",
        f"{c['cost_per_million_total_tokens'] or 0:.4g}"]]) if c.get("price_per_hour") else ""
    fleet = report.get("fleet")
    replicas = "<h2>Replicas</h2>" + html_table(
        ["replica", "requests", "failed", "share", "TTFT median", "TTFT p99", "TPOT median", "running, peak",
         "waiting, peak", "KV cache, peak"],
        [[r["replica"], f"{r['completed']:,}", f"{r.get('failed', 0):,}", f"{r['share']:.0%}", _ms(r["median_ttft_ms"]),
          _ms(r["p99_ttft_ms"]), _ms(r["median_tpot_ms"]),
          "n/a" if r["running_peak"] is None else f"{r['running_peak']:.0f}",
          "n/a" if r["waiting_peak"] is None else f"{r['waiting_peak']:.0f}",
          "n/a" if r["kv_cache_peak"] is None else f"{r['kv_cache_peak']:.0%}"] for r in fleet["replicas"]]) + "".join(
        f"<p>{html.escape(line, quote=False)}.</p>" for line in fleet["lost"]) if fleet else ""
    # The client's refusals beside the engine's, where they agree (where not, the notes say so).
    rejections = (f"<p>{html.escape(report['rejections'], quote=False)}</p>"
                  if report.get("rejections") and report["rejections"] not in report["notes"] else "")
    models = ("<h2>Models and adapters</h2>" + html_table(MODEL_HEADER, model_cells(report["models"]))
              if report.get("models") else "")
    return (figures + cost + rejections + html_table(["latency", "mean", "median", "p99"], rows) + load_generator
            + models + replicas + slo)


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
        ttft = new_chart(f"Client TTFT, p50 and p99 of the requests finishing in each {over['seconds']:g} s (ms)", "ms")
        draw_lines(ttft, {k: (over["t"], over[k]) for k in ("TTFT p50", "TTFT p99")})
        tokens = new_chart("Client TPOT and ITL, p50 and p99 (ms)", "ms", ttft.x_range)
        draw_lines(tokens, {k: (over["t"], over[k])
                            for k in ("TPOT p50", "TPOT p99", "ITL p50", "ITL p99") if k in over})
        throughput = new_chart("Output tokens/s", "tok/s", ttft.x_range)
        draw_lines(throughput, {"output tok/s": (over["t"], over["output tok/s"])})
        failures = new_chart("Failures/s by reason", "per s", ttft.x_range)
        draw_lines(failures, {reason: (over["t"], v) for reason, v in over["failures"].items()})
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
            chart = new_chart(title, unit, x_range)
            draw_lines(chart, lines)
            charts.append(chart)
            x_range = x_range or chart.x_range
    for i, chart in enumerate(charts):
        draw_marks(chart, marks, top=i == 0)
    return charts


def write_run_page(report: dict, results: Results, records: list[dict] | None, api: PrometheusAPI | None,
                   out_dir: Path) -> Path:
    """report.html beside report.md, from what the report already read."""
    w = report["window"]
    notes = [*report["notes"], *([report["engine_missing"]] if report.get("engine_missing") else [])]
    charts = time_charts(records, None if report.get("engine_missing") else api, results.started_at,
                         results.ended_at, [*results.stages, *fault_marks(results.faults)], notes)
    if records:
        points, note = scatter_points(records)
        scatter = new_chart(f"Each request's TTFT against when it was sent ({note}); hover for its id and cause", "ms",
                         charts[0].x_range if charts else None, y_log=True)
        scatter.scatter("t", "ttft", source=ColumnDataSource(points), size=4, alpha=0.5, name="request")
        scatter.add_tools(HoverTool(tooltips=[("id", "@id"), ("scenario", "@scenario"), ("TTFT", "@ttft{0,0.0} ms"),
                                              ("E2E", "@e2e{0,0.0} ms"), ("cause", "@cause")]))
        charts += [scatter, *distributions(records)]
    charts.append(Div(text="<h2>Settings</h2>" + html_table(["option", "value"], [
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


def capacity_charts(result: Capacity, records: list[dict], api: PrometheusAPI | None, start: float,
                    end: float) -> list:
    """The capacity curve with the knee and operating point, then the search over time: client latency
    and throughput from the levels' records, the engine from Prometheus, each level marked."""
    levels = sorted(result.levels, key=lambda lv: lv.level)
    x = [lv.level for lv in levels]
    curve = figure(title="Latency against load (ms), with the knee and the operating point", width=WIDTH,
                   height=HEIGHT + 60, y_axis_type="log", x_axis_label=f"load ({result.unit})", y_axis_label="ms",
                   tools="pan,wheel_zoom,box_zoom,reset,save,hover")
    for i, (key, label) in enumerate((("median_ttft_ms", "TTFT p50"), ("p99_ttft_ms", "TTFT p99"),
                                      ("p99_tpot_ms", "TPOT p99"))):
        ys = [lv.client[key] for lv in levels]
        curve.line(x, ys, legend_label=label, color=COLOURS[i], line_width=2)
        curve.scatter(x, ys, color=COLOURS[i], size=7, legend_label=label)
    curve.legend.click_policy = "hide"
    for value, label, colour in ((result.max_sustainable, "knee", "red"),
                                 (result.recommended, "operating point", "green")):
        if value is not None:
            curve.add_layout(Span(location=value, dimension="height", line_dash="dashed", line_color=colour))
            curve.add_layout(Label(x=value, y=10, y_units="screen", text=f"{label} {value:g}", text_color=colour,
                                   text_font_size="9pt", x_offset=3))
    throughput = figure(title="Output tokens/s against load", width=WIDTH, height=HEIGHT, x_range=curve.x_range,
                        x_axis_label=f"load ({result.unit})", tools="pan,wheel_zoom,box_zoom,reset,save,hover")
    throughput.line(x, [lv.client["output_throughput"] for lv in levels], color=COLOURS[2], line_width=2)
    charts: list = [curve, throughput]
    marks = [Mark(lv.name, lv.start) for lv in sorted(result.levels, key=lambda lv: lv.start) if lv.start]
    charts += time_charts(records, api, start, end, marks, [])
    return charts
