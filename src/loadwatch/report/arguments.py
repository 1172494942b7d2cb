"""The parsers of `loadwatch report`, `compare`, `annotate`, `history`, `export` and `explain`, apart
from what the commands do. `loadwatch` builds them for every command but the sidecar's, so they
import nothing heavy: with the commands' modules (scipy, matplotlib, bokeh) they took 3.3 s of the
start of every command, `engine stop`, `--help` and bad input too. A handler imports its command's
module when it runs."""

from __future__ import annotations

import argparse
from importlib import import_module
from pathlib import Path

from loadwatch.credentials import refused_on_command_line
from loadwatch.defaults import LOOPBACK, PORTS

# The gate's rules where --fail-on gives none (report/gate.py), a user's first gate: the tail
# latencies users feel (p99 is noisier than the median, and 10 % is a change users notice) and output
# throughput (a capacity loss of 5 % is paid for in servers). Each a metric and the worst change it
# lets through, in %.
DEFAULT_FAIL_ON = ("ttft_p99_ms=+10%", "tpot_p99_ms=+10%", "output_throughput=-5%")
FORMAT = "br0.2"  # the one format of `export`: the Benchmark Report v0.2


def _commands():
    """report/commands.py, imported by the handler that runs, never by the parser."""
    return import_module("loadwatch.report.commands")


def _confidence(text: str) -> float:
    value = float(text)
    if not 0.5 <= value <= 0.999:
        raise argparse.ArgumentTypeError(f"{text} is not between 0.5 and 0.999")
    return value


def add_parsers(commands, say) -> None:
    report = commands.add_parser("report", help="Markdown, JSON and a plot of a finished run, from Prometheus")
    report.add_argument("run", type=Path, help="a run folder of `loadwatch run`, or a results JSON")
    report.add_argument("--prometheus", help="Prometheus URL to read; default: the run folder's prometheus-data")
    report.add_argument("--rate-window", default="30s", help="rate() window of the plot, default 30s")
    report.set_defaults(handler=lambda args: _commands().report_command(args, say))

    comp = commands.add_parser("compare", help="A/B tables of runs: figures, then each %% change with its 95 %% "
                                               "interval and a verdict (better, worse, same)")
    comp.add_argument("results", nargs="+", metavar="[NAME=]RUN[,RUN...]",
                      help="results JSON files or run folders; several joined by commas are repeats of one "
                           "configuration; the first is the baseline")
    comp.add_argument("--markdown", type=Path, help="also write the tables to this file")
    comp.add_argument("--confidence", type=_confidence, default=0.95, help="of the intervals, 0.5 to 0.999 (0.95)")
    comp.add_argument("--json", type=Path, help='also write {"rows": [{"run", "metric", "change_pct", "ci_low", '
                                                '"ci_high", "verdict", ...}]} to this file')
    comp.add_argument("--fail-on", action="append", metavar="METRIC[=MARGIN%]",
                      help="gate on this metric, repeatable: exit 3 when it got worse beyond doubt (its interval "
                           "wholly on the worse side) and by more than the margin (none: any such change); default "
                           + " ".join(f"--fail-on {rule}" for rule in DEFAULT_FAIL_ON).replace("%", "%%"))
    comp.add_argument("--no-gate", action="store_true", help="print the tables only, judging nothing (exit 0)")
    comp.set_defaults(handler=lambda args: _commands().compare_command(args, say))

    posting = commands.add_parser("annotate", help="post a run and its stages as Grafana annotations")
    posting.add_argument("run", type=Path, help="a run folder or a results JSON")
    posting.add_argument("--grafana-url", required=True, help=f"e.g. http://{LOOPBACK}:{PORTS['grafana']}")
    posting.add_argument("--token-file", type=Path, help="file holding the Grafana service-account token; "
                                                         "default $GRAFANA_TOKEN_FILE, else $GRAFANA_TOKEN")
    posting.add_argument("--token", help=argparse.SUPPRESS, action=refused_on_command_line(
        "Put the token in $GRAFANA_TOKEN, or in a file named by --token-file or $GRAFANA_TOKEN_FILE."))
    posting.set_defaults(handler=lambda args: _commands().annotate(args.run, args.grafana_url, args.token_file, say))

    past = commands.add_parser("history", help="a history of runs (SQLite): `history add RUN --history PATH` "
                                               "adds one; `history PATH` writes its page, --gate judges the newest")
    past.add_argument("items", nargs="+", metavar="PATH | add RUN", help="a history file, or `add` and a run folder "
                                                                     "or results JSON")
    past.add_argument("--history", type=Path, default=Path("history.db"),
                      help="with add: the history file, created on first use (default history.db)")
    past.add_argument("--label", help="with add: the run's name on the page, e.g. a commit or a release")
    past.add_argument("-o", "--output", type=Path, help="the page to write; default: the history's name with .html")
    past.add_argument("--gate", action="store_true", help="judge the newest run against the comparable runs before "
                                                         "it: exit 3 on a regression beyond its margin, as compare")
    past.add_argument("--fail-on", action="append", metavar="METRIC[=MARGIN%]",
                      help="with --gate, as compare's (the same defaults)")
    past.set_defaults(handler=lambda args: _commands().history_command(args, say))

    export = commands.add_parser("export", help="a run in another tool's format: --format br0.2, the Benchmark "
                                                "Report v0.2 of llm-d-benchmark and inference-perf")
    export.add_argument("run", type=Path, help="a run folder or a results JSON")
    export.add_argument("--format", choices=[FORMAT], default=FORMAT, help="the format (br0.2)")
    export.add_argument("-o", "--output", type=Path, help="the file to write; default: "
                                                        "benchmark_report_v0.2.yaml beside the results")
    export.set_defaults(handler=lambda args: _commands().export_command(args, say))

    why = commands.add_parser("explain", help="why a request was slow: its timeline, the engine's account and "
                                              "state, and the cause, from a finished run's folder")
    why.add_argument("run", type=Path, help="a run folder (or a results JSON) with its per-request records; a "
                                            "capacity search's folder (its decisive level), or an experiment's "
                                            "(its one cell; with several, they are listed)")
    why.add_argument("request_id", nargs="?", help="the request's id (its X-Request-Id, in its record and in "
                                                   "the exemplars), or a unique start of it")
    why.add_argument("--slowest", type=int, default=5, metavar="N",
                     help="without an id: the N slowest measured requests (5)")
    why.add_argument("--by", choices=("ttft", "e2e"), default="ttft", help="slowest by TTFT (default) or E2E")
    why.set_defaults(handler=lambda args: import_module("loadwatch.report.explain").explain_command(args, say))
