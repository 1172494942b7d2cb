"""`loadwatch history PATH`: one offline page of a history, a trend per metric for each group of
comparable runs. Each run's value with its own interval (whiskers), the noise band of the runs before
the newest (where one more run of the same configuration falls, 95 %), and the runs where a change
beyond doubt began (and by 2 % or more), marked with the change and the run's label (a commit, a
release)."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from bokeh.models import ColumnDataSource
from bokeh.models.annotations import BoxAnnotation, Whisker

from loadwatch.report.history import Entry, History, noise_band, shift
from loadwatch.report.page import html_table, new_chart, write_page

# A change beyond doubt smaller than this is not marked: with runs that agree to the microsecond (a
# constant TPOT), the noise band is so narrow that rounding is "beyond doubt".
MARKED_PCT = 2.0
# The trends drawn: what users watch, and what the gate's defaults judge.
DRAWN = ("p99_ttft_ms", "median_ttft_ms", "p99_tpot_ms", "median_tpot_ms", "output_throughput", "request_throughput")


def began(entries: list[Entry], metric: str) -> list[tuple[Entry, float]]:
    """The runs whose metric changed beyond doubt against the comparable runs before them since the
    last such change (a new level: the runs after it are judged against it), with the change in %."""
    marked: list[tuple[Entry, float]] = []
    since = 0
    for i, entry in enumerate(entries):
        moved = shift(entries[since:i], entry, metric)
        change = moved.change_pct if moved is not None and moved.verdict != "same" else None
        if change is not None and abs(change) >= MARKED_PCT:
            marked.append((entry, change))
            since = i
    return marked


def _when(entry: Entry) -> datetime:
    return datetime.fromtimestamp(entry.started_at, UTC)


def charts(entries: list[Entry], title: str, marks: dict[str, list[tuple[Entry, float]]]) -> list:
    """A trend per metric; `marks`: where a change of each began (`began`)."""
    out = []
    for metric in DRAWN:
        points = [(e, *e.figures[metric]) for e in entries if e.figures.get(metric, (None,))[0] is not None]
        if not points:
            continue
        chart = new_chart(f"{title}: {metric}", metric)
        source = ColumnDataSource({"x": [_when(e) for e, *_ in points], "y": [v for _, v, _, _ in points],
                                   "low": [lo if lo is not None else v for _, v, lo, _ in points],
                                   "high": [hi if hi is not None else v for _, v, _, hi in points],
                                   "label": [e.label for e, *_ in points]})
        chart.line("x", "y", source=source, line_width=1, color="#1f77b4")
        chart.scatter("x", "y", source=source, size=7, color="#1f77b4", name=metric)
        chart.add_layout(Whisker(source=source, base="x", lower="low", upper="high"))
        band = noise_band([v for _, v, _, _ in points[:-1]])
        if band is not None:
            chart.add_layout(BoxAnnotation(bottom=band[1], top=band[2], fill_alpha=0.12, fill_color="green"))
        for entry, change in marks[metric]:
            value = entry.figures[metric][0]
            chart.scatter([_when(entry)], [value], size=14, marker="triangle", color="#d62728",
                          name=f"{entry.label}: {change:+.1f} %")
        out.append(chart)
    return out


def write(history: History, path: Path) -> Path:
    """The page of every group of comparable runs, the newest group first."""
    entries = history.entries()
    if not entries:
        raise ValueError(f"{history.path} holds no run yet: `loadwatch history add RUN --history {history.path}`")
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.key, []).append(entry)
    body = [f"<h1>History of {html.escape(str(history.path))}</h1>",
            f"<p>{len(entries)} runs in {len(groups)} groups of comparable runs (the same workload, load, model and "
            "loadwatch version). Whiskers: each run's own 95 % interval, from its requests; green band: where one "
            "more run of the configuration falls (95 %), from the runs before the newest; red triangles: a change "
            "beyond doubt began there.</p>"]
    drawn = []
    for key, group in sorted(groups.items(), key=lambda kv: -kv[1][-1].started_at):
        what = history.key_of(group[-1])
        title = f"group {key}"
        rows = [[e.label, e.run_id, _when(e).strftime("%Y-%m-%d %H:%M:%S"),
                 *(f"{e.figures.get(m, (None,))[0]:.1f}" if e.figures.get(m, (None,))[0] is not None else "n/a"
                   for m in DRAWN[:3])] for e in group]
        marks = {metric: began(group, metric) for metric in DRAWN}
        changes = [f"{entry.label}: {metric} {change:+.1f} %" for metric in DRAWN for entry, change in marks[metric]]
        body += [f"<h2>{html.escape(title)}: {len(group)} runs</h2>",
                 f"<p><code>{html.escape(str(what))}</code></p>",
                 html_table(["label", "run", "started (UTC)", *DRAWN[:3]], rows),
                 "<p>Changes beyond doubt: " + (html.escape("; ".join(changes)) or "none") + "</p>"]
        drawn += charts(group, title, marks)
    return write_page(path, "loadwatch history", "".join(body), drawn)
