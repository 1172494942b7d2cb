"""`loadwatch report`, `compare` and `annotate`: what is done with a run once it is over."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from loadwatch.atomic import write_atomically
from loadwatch.credentials import CredentialError, read_secret
from loadwatch.grafana.annotate import AnnotateError, post_annotations
from loadwatch.metrics.bootstrap import Change
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report import gate, history_page
from loadwatch.report.benchmark_report import benchmark_report, dump
from loadwatch.report.build import ReportError, build_report, read_results, results_path
from loadwatch.report.comparable import differences
from loadwatch.report.compare import compare, load_side
from loadwatch.report.engine import SETTLE_SECONDS
from loadwatch.report.exact import records_of
from loadwatch.report.history import MIN_BEFORE, History, HistoryError, shift
from loadwatch.stack.readback import DATA, data_of, prometheus_on


def write_report(results: Path, api: PrometheusAPI | None, rate_window: str, say,
                 settle: float = SETTLE_SECONDS) -> int:
    report = build_report(results, api, results.parent, rate_window, settle)
    for note in [*report["notes"], *([report["engine_missing"]] if report["engine_missing"] else [])]:
        say(f"warning: {note}")
    say(f"report: {results.parent / report['html']} (and report.md, report.json"
        + (f", {report['plot']})" if report["plot"] else ")"))
    return 0


def report_command(args: argparse.Namespace, say) -> int:
    results = results_path(args.run)
    try:
        read_results(results)
        if args.prometheus:
            return write_report(results, PrometheusAPI(args.prometheus), args.rate_window, say)
        data = data_of(results)
        if data is None:
            say(f"warning: no {DATA} in or above {results.parent} and no --prometheus: the report has the client "
                "side only")
            return write_report(results, None, args.rate_window, say)
        say(f"reading {data} with a temporary Prometheus")
        with prometheus_on(data, results.parent / "logs") as api:
            return write_report(results, api, args.rate_window, say)
    except (ReportError, PrometheusError) as exc:
        say(f"error: {exc}")
        return 1


def compare_command(args: argparse.Namespace, say) -> int:
    """The tables, then the gate: exit 3 when a gated metric got worse beyond doubt and beyond its margin."""
    try:
        rules = [] if args.no_gate else gate.parse(args.fail_on)
    except gate.GateError as exc:
        say(f"error: {exc}")
        return 2
    try:
        sides = [load_side(spec) for spec in args.results]
        text, rows = compare(sides, args.confidence)
    except ReportError as exc:  # a run that cannot be read is bad input: the gate has nothing to stand on
        say(f"error: {exc}")
        return 2
    runs = {f"{side.name}[{i + 1}]" if len(side.runs) > 1 else side.name: run.results
            for side in sides for i, run in enumerate(side.runs)}
    unlike = differences(runs)
    if unlike and rules:
        say("error: the runs are not comparable, so a gate on them would judge the workload, not the server: "
            + "; ".join(unlike) + " (--no-gate prints the tables anyway)")
        return 2
    if unlike:
        say("note: the runs differ in what they sent: " + "; ".join(unlike))
    print(text, flush=True)
    judgements = gate.judge(rules, rows)  # none without rules (--no-gate)
    try:
        if args.markdown:
            write_atomically(args.markdown, text + (gate.markdown(judgements) if judgements else ""))
            say(f"written to {args.markdown}")
        if args.json:
            write_atomically(args.json, json.dumps({"rows": rows}, indent=2) + "\n")
            say(f"rows written to {args.json}")
    except OSError as exc:
        say(f"error: cannot write {exc.filename}: {exc.strerror}")
        return 1
    if not rules:
        return 0
    return gate.verdict(judgements, say)


def annotate(run: Path, grafana_url: str, token_file: Path | None, say) -> int:
    """Post a run's annotations with the token of --token-file, $GRAFANA_TOKEN_FILE or $GRAFANA_TOKEN."""
    try:
        token = read_secret("GRAFANA_TOKEN", token_file)
        results = read_results(results_path(run))
        posted = post_annotations(grafana_url, token, results)
    except (ReportError, AnnotateError, CredentialError) as exc:
        say(f"error: {exc}")
        return 1
    say(f"{posted} annotations posted to {grafana_url} (tag loadwatch, run {results.run_id})")
    return 0


def export_command(args: argparse.Namespace, say) -> int:
    """A run in another tool's format: llm-d-benchmark's and inference-perf's Benchmark Report."""
    path = results_path(args.run)
    try:
        results = read_results(path)
        records = records_of(path, results) if results.records else None
        out = args.output or path.parent / "benchmark_report_v0.2.yaml"
        # A fleet's: the run's report, and beside it one of each replica's requests.
        written = {out: benchmark_report(results, records)} | {
            out.with_name(f"{out.stem}.replica-{name}{out.suffix}"): benchmark_report(results, records, name)
            for name in results.replicas}
        for where, report in written.items():
            write_atomically(where, dump(report))
    except ReportError as exc:
        say(f"error: {exc}")
        return 1
    except OSError as exc:
        say(f"error: cannot write {exc.filename}: {exc.strerror}")
        return 1
    say(f"Benchmark Report v0.2 written to {out}")
    for where in list(written)[1:]:
        say(f"  and of replica {where.stem.rpartition('.replica-')[2]}'s requests: {where}")
    return 0


def history_add(history_path: Path, run: Path, label: str | None, say) -> int:
    """Add a run to a history (created on first use)."""
    try:
        history = History(history_path, create=True)
        try:
            entry, added = history.add(results_path(run), label)
            group = history.entries(entry.key)
        finally:
            history.close()
    except (HistoryError, ReportError) as exc:
        say(f"error: {exc}")
        return 2
    say(f"{'added' if added else 'already in the history'}: {entry.label} ({entry.run_id}) to {history_path}, "
        f"with {len(group) - 1} comparable runs before it (group {entry.key})")
    return 0


def history_command(args: argparse.Namespace, say) -> int:
    """`history add RUN --history PATH`, or `history PATH`: its page, and with --gate its newest run judged."""
    if args.items[0] == "add":
        if len(args.items) != 2:
            say("error: history add takes one run: loadwatch history add RUN --history PATH")
            return 2
        return history_add(args.history, Path(args.items[1]), args.label, say)
    if len(args.items) != 1:
        say("error: loadwatch history PATH (a history file), or loadwatch history add RUN --history PATH")
        return 2
    path = Path(args.items[0])
    try:
        rules = gate.parse(args.fail_on) if args.gate else []
        history = History(path)
    except (gate.GateError, HistoryError) as exc:
        say(f"error: {exc}")
        return 2
    try:
        page = history_page.write(history, args.output or path.with_suffix(".html"))
        say(f"history page written to {page}")
        if not args.gate:
            return 0
        entries = history.entries()
        newest = max(entries, key=lambda e: e.started_at)
        group = history.entries(newest.key)
        before = [e for e in group if e.id != newest.id and e.started_at <= newest.started_at]
        others = len(entries) - len(group)
        if others:
            say(f"{others} runs of other workloads, loads, models or versions are not compared with {newest.label}")
        if len(before) < MIN_BEFORE:  # each metric's "no interval" would point at repeats, which is not the fix
            say(f"cannot judge {newest.label}: the gate needs {MIN_BEFORE} comparable runs before it to know "
                f"their run-to-run noise, and the history has {len(before)}")
            say(gate.OUTCOMES[1])
            return 1
        rows = [{"run": newest.label, "base": f"{len(before)} comparable runs before it", "metric": rule.key,
                 **asdict(shift(before, newest, rule.key) or Change(None))} for rule in rules]
        return gate.verdict(gate.judge(rules, rows), say)
    except ValueError as exc:  # an empty history: nothing to draw or judge
        say(f"error: {exc}")
        return 2
    except OSError as exc:
        say(f"error: cannot write {exc.filename}: {exc.strerror}")
        return 1
    finally:
        history.close()
