"""The experiment's summary: each arm's figures per workload and level (the articles' first table)
with what the engine did, each arm against the baseline with intervals and verdicts, and with
several load levels a Pareto plot like vLLM's sweep."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from loadwatch.atomic import write_atomically
from loadwatch.experiment.outcome import Outcome
from loadwatch.experiment.spec import Experiment
from loadwatch.metrics.experiment import ArmCapacity, CellRun, EngineFigures, ExperimentSummary, Group, Row
from loadwatch.metrics.repeats import MIN_RUNS
from loadwatch.metrics.results import latency_key
from loadwatch.report import compare
from loadwatch.report.build import ReportError
from loadwatch.report.html import PAGE
from loadwatch.report.markdown import number, share, table
from loadwatch.report.page import markdown_html, write_page

PARETO = "pareto.png"
FIGURES = [("req/s", "request_throughput"), ("output tok/s", "output_throughput"),
           ("mean TTFT (ms)", latency_key("ttft", "mean")), ("median TTFT (ms)", latency_key("ttft", "median")),
           ("mean TPOT (ms)", latency_key("tpot", "mean")), ("mean E2EL (ms)", latency_key("e2el", "mean"))]
VERDICT_KEYS = ("output_throughput", latency_key("ttft", "mean"), latency_key("ttft", "median"),
                latency_key("ttft", "p99"), latency_key("tpot", "median"), latency_key("e2el", "median"))


def _report(outcome: Outcome) -> dict:
    try:
        return json.loads((outcome.folder / "report.json").read_text())
    except (OSError, ValueError):
        return {}


def _lengths(outcomes: list[Outcome]) -> list[float]:
    """Seconds each run cell ran, warm-up included, as its results say: a slow server stretches them."""
    out = []
    for o in outcomes:
        if o.cell.search or o.results is None:
            continue
        try:
            results = json.loads(o.results.read_text())
            out.append(float(results["ended_at"]) - float(results["started_at"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def ran_for(lengths: list[float], asked: float) -> str:
    """The cells' length in words: as asked, or what they actually ran and why."""
    if not lengths or max(lengths) <= 1.1 * asked:
        return f"{asked:g} s"
    low, high = min(lengths), max(lengths)
    span = f"{low:.0f} s" if round(low) == round(high) else f"{low:.0f} to {high:.0f} s"
    return f"{span} (asked {asked:g} s: stretched until each completed enough requests to judge)"


def _mean(values: Sequence[float | None], take=np.mean) -> float | None:
    known = [v for v in values if v is not None]
    return float(take(known)) if known else None


def group(outcomes: list[Outcome]) -> list[tuple[Group, compare.Side | None]]:
    """One entry per arm x workload x level: its runs, mean figures and what the engine did, with the
    runs read together for the verdicts (None where none could be)."""
    members: dict[Path, list[Outcome]] = {}
    for o in outcomes:
        if not o.cell.search:
            members.setdefault(o.cell.group, []).append(o)
    out = []
    for folder, ran in members.items():
        cell = ran[0].cell
        # A cell with too few requests is left out: its figures would be noise, or n/a; the notes say why.
        measured = [o.results for o in ran if o.results is not None and not o.too_few]
        reports = [_report(o) for o in ran if o.results is not None and not o.too_few]
        engines = [r.get("engine") or {} for r in reports]
        side, problem = None, None
        try:
            side = compare.Side(cell.arm, [compare.load_run(p) for p in measured]) if measured else None
        except ReportError as exc:
            problem = str(exc)
        g = Group(arm=cell.arm, workload=cell.workload, level=cell.level, unit=cell.unit, folder=str(folder),
                  runs=[str(p) for p in measured], failed_cells=sum(o.results is None for o in ran),
                  short_cells=sum(o.results is not None and bool(o.too_few) for o in ran),
                  engine_missing=next((r["engine_missing"] for r in reversed(reports) if r.get("engine_missing")),
                                      None),
                  problem=problem, figures={key: side.figure(key) if side else None for _, key in FIGURES},
                  engine=EngineFigures(
                      prefix_cache_hit_ratio=_mean([e.get("prefix_cache_hit_ratio") for e in engines]),
                      kv_cache_usage_peak=_mean([e.get("kv_cache_usage_peak") for e in engines], np.max),
                      preemptions=_mean([e.get("preemptions") for e in engines]),
                      requests_waiting_peak=_mean([e.get("requests_waiting_peak") for e in engines], np.max)))
        out.append((g, side))
    return out


def verdicts(experiment: Experiment, groups: list[tuple[Group, compare.Side | None]]) -> list[Row]:
    """Each arm against the baseline arm on the same workload and level."""
    rows = []
    for g, side in groups:
        if g.arm == experiment.baseline or side is None:
            continue
        base = next((b_side for b, b_side in groups if b.arm == experiment.baseline and b.workload == g.workload
                     and b.level == g.level and b_side is not None), None)
        if base is None:
            continue
        for row in compare.rows(base, side):
            rows.append(Row(arm=g.arm, base=experiment.baseline, workload=g.workload, level=g.level, unit=g.unit,
                            metric=row.key, base_value=row.base, value=row.value, change_pct=row.change.change_pct,
                            ci_low=row.change.ci_low, ci_high=row.change.ci_high, verdict=row.change.verdict,
                            method=row.method))
    return rows


def pareto(groups: list[Group], path: Path) -> Path | None:
    """Total output tok/s against each user's tok/s (1000 / mean TPOT), a line per arm and workload."""
    lines: dict[str, list[tuple[float, float]]] = {}
    for g in groups:
        tpot, total = g.figures.get(latency_key("tpot", "mean")), g.figures.get("output_throughput")
        if tpot and total:
            lines.setdefault(f"{g.arm} / {g.workload}", []).append((1000 / tpot, total))
    if not any(len(points) > 1 for points in lines.values()):
        return None
    figure = Figure(figsize=(8, 5))
    axes = figure.subplots()
    for label, points in sorted(lines.items()):
        xs, ys = zip(*sorted(points), strict=True)
        axes.plot(xs, ys, marker="o", label=label)
    axes.set_xlabel("output tok/s per user (1000 / mean TPOT)")
    axes.set_ylabel("output tok/s, all users")
    axes.set_title("Throughput against interactivity, one point per load level")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.savefig(path, dpi=100, bbox_inches="tight")
    return path


def capacities(outcomes: list[Outcome]) -> list[ArmCapacity]:
    """Each arm and workload's capacity search: what it sustained and what limits it."""
    return [ArmCapacity.model_validate({"arm": o.cell.arm, "workload": o.cell.workload, "folder": str(o.cell.folder),
                                        **o.capacity.model_dump(include=set(ArmCapacity.model_fields))})
            for o in outcomes if o.cell.search and o.capacity is not None]


def _capacity_table(rows: list[ArmCapacity]) -> list[str]:
    return ["## Capacity", "", "The most load each arm sustained within the SLOs (`loadwatch capacity`'s search, "
            "once per arm and workload), and the limit that binds.", "",
            *(f"- {c.arm} / {c.workload}: the knee was not located: {c.undecided}." for c in rows if c.undecided),
            *([""] if any(c.undecided for c in rows) else []),
            *table(["arm", "workload", "sustained", "recommended", "output tok/s at it", "limit"],
                   [[c.arm, c.workload,
                     ("none" if c.max_sustainable is None else f"{c.max_sustainable:g} {c.unit}")
                     + (" or more (knee not located)" if c.undecided else ""),
                     "n/a" if c.recommended is None else f"{c.recommended:g} {c.unit}",
                     number(c.output_throughput_at_max), c.limit or "n/a"] for c in rows])]


def _runs(g: Group) -> str:
    left_out = [f"{count} {word}" for count, word in ((g.failed_cells, "failed"), (g.short_cells, "too short"))
                if count]
    return f"{len(g.runs)}" + (f" ({', '.join(left_out)})" if left_out else "")


def _level(g: Group) -> str:
    return f"{g.level:g} {g.unit}"


def render(experiment: Experiment, groups: list[Group], rows: list[Row], notes: list[str], plot: Path | None,
           capacity: list[ArmCapacity], ran: str | None = None) -> str:
    """`ran`: how long the cells ran, in words (default: as asked)."""
    many_levels = len({g.level for g in groups}) > 1
    lines = [f"# loadwatch experiment: {experiment.name}", ""]
    if experiment.description:
        lines += [experiment.description.strip(), ""]
    if experiment.load.capacity is not None:
        lines += _capacity_table(capacity)
        if notes:
            lines += ["", "## Notes", "", *(f"- {n}" for n in notes)]
        return "\n".join(lines) + "\n"
    lines += [f"{len(experiment.arms)} arms x {len(experiment.workloads)} workloads x {len(experiment.load.levels)} "
              f"load levels, {experiment.repeats} runs each of {ran or f'{experiment.load.duration:g} s'}"
              + (", the prefix cache emptied before each run" if experiment.reset_prefix_cache else "")
              + ". Figures are the mean over a cell's runs; each run's folder holds its results, per-request "
              "records and report.", "", "## Results", ""]
    header = ["arm", "workload", *(["load"] if many_levels else []), "runs", *(label for label, _ in FIGURES),
              "prefix-cache hits", "KV cache peak", "preemptions"]
    lines += table(header, [[g.arm, g.workload, *([_level(g)] if many_levels else []),
                             _runs(g),
                             *(number(g.figures.get(key)) for _, key in FIGURES),
                             share(g.engine.prefix_cache_hit_ratio), share(g.engine.kv_cache_usage_peak),
                             number(g.engine.preemptions, 0)] for g in groups])
    shown = [r for r in rows if r.metric in VERDICT_KEYS]
    if shown:
        lines += ["", f"## Against {experiment.baseline}", "",
                  f"Each change with its 95 % interval and a verdict: `same` when the interval spans 0. With "
                  f"{MIN_RUNS} runs a side or more, Welch's t on the logs of the runs' figures (the change is the "
                  "ratio of the arms' geometric means, bounded below by -100 %); with one, a bootstrap over "
                  "blocks of its requests, blind to run-to-run noise, and no verdict on throughput. Throughput: "
                  "higher is better; latency: lower is better.",
                  ""]
        lines += table(["arm", "workload", *(["load"] if many_levels else []), "metric", experiment.baseline or "",
                        "arm's", "change", "95 % interval", "verdict"],
                       [[r.arm, r.workload, *([f"{r.level:g} {r.unit}"] if many_levels else []),
                         r.metric, number(r.base_value), number(r.value),
                         "n/a" if r.change_pct is None else f"{r.change_pct:+.1f}%",
                         "n/a" if r.ci_low is None or r.ci_high is None else f"[{r.ci_low:+.1f}%, {r.ci_high:+.1f}%]",
                         r.verdict or "n/a"] for r in shown])
    if plot:
        lines += ["", f"![Pareto]({plot.name})"]
    if notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def cell_links(exp_dir: Path, outcomes: list[Outcome]) -> str:
    """The page's list of cells, each linked to its own report.html (relative: the folder moves whole)."""
    lines = ["", "## Cells", ""]
    for o in outcomes:
        page = o.folder / PAGE
        shown = o.folder.relative_to(exp_dir) if o.folder.is_relative_to(exp_dir) else o.folder
        lines.append(f"- [{shown}]({page.relative_to(exp_dir) if page.is_relative_to(exp_dir) else page})"
                     if page.is_file() else f"- {shown}: no report ({o.problem or 'the cell did not finish'})")
    return "\n".join(lines) + "\n"


def write(exp_dir: Path, experiment: Experiment, outcomes: list[Outcome], say) -> Path:
    read = group(outcomes)
    rows = verdicts(experiment, read)
    groups = [g for g, _ in read]
    notes = sorted({n for o in outcomes for n in o.notes}
                   | {f"{o.cell.folder}: {o.problem}" for o in outcomes if o.problem}
                   | {f"{o.cell.folder}: {o.too_few}; left out of the figures" for o in outcomes if o.too_few}
                   | {f"{g.folder}: {g.problem}" for g in groups if g.problem}
                   | {f"{g.arm} / {g.workload}: its prefix-cache, KV cache and preemption columns read n/a: "
                      f"{g.engine_missing}" for g in groups
                      if g.engine_missing and all(v is None for v in g.engine.model_dump().values())})
    plot = pareto(groups, exp_dir / PARETO) if len(experiment.load.levels) > 1 else None
    capacity = capacities(outcomes)
    document = ExperimentSummary(
        name=experiment.name, baseline=experiment.baseline, repeats=experiment.repeats, groups=groups, rows=rows,
        capacity=capacity, notes=notes, pareto=plot.name if plot else None,
        cells=[CellRun(folder=str(o.cell.folder), arm=o.cell.arm, workload=o.cell.workload, level=o.cell.level,
                       unit=o.cell.unit, repeat=o.cell.repeat, results=str(o.results) if o.results else None,
                       problem=o.problem, too_few=o.too_few) for o in outcomes])
    write_atomically(exp_dir / "summary.json", document.json_text())
    ran = ran_for(_lengths(outcomes), experiment.load.duration)
    text = render(experiment, groups, rows, notes, plot, capacity, ran)
    write_atomically(exp_dir / "summary.md", text)
    write_page(exp_dir / "summary.html", f"loadwatch experiment {experiment.name}",
               markdown_html(text + cell_links(exp_dir, outcomes), exp_dir))
    for c in capacity:
        say(f"{c.arm} / {c.workload}: capacity " + ("none" if c.max_sustainable is None else
                                                    f"{c.max_sustainable:g} {c.unit}, limit {c.limit}"))
    for r in rows:
        if r.metric == latency_key("ttft", "median") and r.verdict:
            say(f"{r.arm} / {r.workload}: median TTFT {r.change_pct or 0:+.1f}% "
                f"[{r.ci_low or 0:+.1f}%, {r.ci_high or 0:+.1f}%] against {r.base}: {r.verdict}")
    return exp_dir / "summary.md"
