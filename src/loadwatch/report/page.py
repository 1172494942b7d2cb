"""What every loadwatch page is made of: Bokeh charts on one shared time axis (its script inlined, so
a page is one file that opens offline), tables, and a report's Markdown turned into HTML."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import NamedTuple

import markdown
from bokeh.embed import file_html
from bokeh.layouts import column
from bokeh.models import HoverTool
from bokeh.models.annotations import Label, Span
from bokeh.models.widgets import Div
from bokeh.plotting import figure
from bokeh.resources import INLINE

from loadwatch.atomic import write_atomically

WIDTH, HEIGHT = 1100, 240
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
STYLE = ("<style>table{border-collapse:collapse;margin:8px 0}td,th{padding:2px 12px 2px 0;text-align:left}"
         "p.note{color:#a15c00}body{font-family:sans-serif}</style>")


class Mark(NamedTuple):
    """A dashed line across the time charts: a stage, a capacity level."""

    name: str
    start: float


def new_chart(title: str, y_label: str, x_range=None, y_log: bool = False):
    options = {"x_range": x_range} if x_range is not None else {}
    chart = figure(title=title, x_axis_type="datetime", width=WIDTH, height=HEIGHT, y_axis_label=y_label,
                   tools="xpan,xwheel_zoom,box_zoom,reset,save", y_axis_type="log" if y_log else "linear", **options)
    chart.add_tools(HoverTool(tooltips=[("", "$name"), ("time", "$x{%H:%M:%S}"), ("value", "$y{0,0.0}")],
                              formatters={"$x": "datetime"}))
    return chart


def draw_lines(chart, series: dict[str, tuple[list, list]]) -> None:
    for i, (name, (xs, ys)) in enumerate(series.items()):
        chart.line(xs, ys, legend_label=name, name=name, color=COLOURS[i % len(COLOURS)], line_width=2)
    if series:
        chart.legend.click_policy = "hide"  # a legend entry toggles its series
        chart.legend.location = "top_left"


def draw_marks(chart, stages, top: bool) -> None:
    for stage in stages:
        chart.add_layout(Span(location=stage.start * 1000, dimension="height", line_dash="dashed", line_color="grey"))
        if top:
            chart.add_layout(Label(x=stage.start * 1000, y=4, y_units="screen", text=stage.name,
                                   text_font_size="9pt", text_color="grey", x_offset=3))


def html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='lw'><tr>{head}</tr>{body}</table>"


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
