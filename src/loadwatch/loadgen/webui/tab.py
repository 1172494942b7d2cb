"""The "LLM" tab of Locust's web UI, its /metrics route, and what the UI may change.

Whoever reaches the web UI may set the load (users, rate, shape, dataset name) but nothing that
chooses a file the master reads or writes, or a credential: Locust's /swarm would take any option
it is sent, shown in the form or not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from flask import Response, jsonify, request, send_file, send_from_directory
from locust.argument_parser import ui_extra_args_dict
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from loadwatch.credentials import split_credentials
from loadwatch.loadgen.state import RunState
from loadwatch.loadgen.webui import login
from loadwatch.loadgen.webui.engine_watch import EngineWatch
from loadwatch.loadgen.webui.history import History
from loadwatch.metrics.results import Figures
from loadwatch.metrics.summary import figures
from loadwatch.settings import LoadSettings

STATIC = Path(__file__).parent / "static"
# The page gets the charting library Locust's own charts use (ECharts), then the LLM tab's charts.
SCRIPTS = ('<script src="./loadwatch/static/echarts.min.js"></script>'
           '<script src="./loadwatch/static/cockpit.js"></script>')
TAB_KEY = "llm"
TAB_REFRESH_SECONDS = 1.0
COLUMNS = [
    ("name", "Scenario (model) or replica"),
    ("requests", "Requests"),
    ("failures", "Failures"),
    ("rejected", "Rejected"),
    *[(f"{m}_{p}", f"{m.upper()} {p} (ms)") for m in ("ttft", "tpot", "itl", "e2el") for p in ("p50", "p90", "p99")],
    ("output_throughput", "Output tok/s"),
]


def tab_rows(state: RunState) -> list[dict]:
    """A row per scenario, then, in a fleet, a row per replica: its requests, failures, latencies and
    throughput (a failure is a replica's where its answer named it: smg's header; else only the scenario's)."""
    recorder = state.recorder
    rows = [_row(f"{scenario} ({model})", series)
            for (model, scenario), series in sorted(recorder.samples.by_scenario().items())]
    # blank rather than 0 where none was named: behind vllm-router no failure can be (its errors carry no fingerprint)
    rows += [(row := _row(f"replica {name}", series)) | {"failures": row["failures"] or ""}
             for (name, *_), series in sorted(recorder.by_replica.by_key.items())]
    return rows


def _row(name: str, series) -> dict:
    f = Figures.model_validate(figures(series))
    row: dict = {"name": name, "requests": f.completed + f.failed + f.rejected, "failures": f.failed,
                 "rejected": f.rejected}
    for key, _title in COLUMNS[4:-1]:
        metric, p = key.split("_")
        value = f.latency(metric, p)
        row[key] = "" if value is None else round(value, 1)
    row["output_throughput"] = round(f.output_throughput, 1)
    return row


# The fields of Locust's own start form; the rest of a /swarm request must be web-UI options.
LOCUST_FORM = frozenset({"user_count", "spawn_rate", "host", "user_classes", "run_time", "profile", "shape_class"})


def refusal(form, editable: frozenset[str]) -> str | None:
    """Why a /swarm form is refused, or None."""
    others = sorted(set(form) - LOCUST_FORM - editable)
    if others:
        return (f"not settable from the web UI: {', '.join(others)} (paths and credentials are given on the "
                "command line or in the environment of the master)")
    if split_credentials(form.get("host", ""))[1]:
        return ("the host has a user and password in it: give the key in $OPENAI_API_KEY (or a file named by "
                "--api-key-file), or start Locust with the URL in $LOCUST_HOST")
    return None


def downloads(settings: LoadSettings) -> dict[str, tuple[str, Path]]:
    """What the DOWNLOAD DATA tab offers once written: key -> (title, file)."""
    out: dict[str, tuple[str, Path]] = {}
    if settings.results_json is not None:
        out["results"] = ("Results JSON (loadwatch)", settings.results_json)
        out["summary"] = ("Result block, as vllm bench serve prints it (loadwatch)",
                          settings.results_json.with_suffix(".txt"))
    if settings.requests_path is not None:
        out["records"] = ("Per-request records, JSON lines (loadwatch)", settings.requests_path)
    if settings.results_json is not None:
        out["report"] = ("Report page, report.html (loadwatch)", settings.results_json.parent / "report.html")
    return out


def install_cockpit(web_ui, state: RunState, settings: Callable[[], LoadSettings],
                    user_count: Callable[[], int]) -> History:
    """The LLM tab's charts (history on the master, the engine read by it) and the run's files."""
    url = settings().engine_metrics
    engine = EngineWatch(url) if url else None
    history = History(state, user_count, engine)
    if engine:
        engine.start()
    history.start()

    @web_ui.app.route("/loadwatch/history")
    @web_ui.auth_required_if_enabled
    def llm_history():
        return jsonify(history.as_dict(request.args.get("since", type=float)))

    @web_ui.app.route("/loadwatch/static/<path:name>")
    def llm_static(name: str):
        return send_from_directory(STATIC, name)

    files = downloads(settings())

    @web_ui.app.route("/loadwatch/download/<key>")
    @web_ui.auth_required_if_enabled
    def llm_download(key: str):
        if key not in files:
            return jsonify({"message": f"no such file: {key}"}), 404
        title, path = files[key]
        if not path.is_file():
            return jsonify({"message": f"{path.name} is not written yet: it is written when the run stops"}), 404
        return send_file(path.resolve(), as_attachment=True, download_name=path.name)

    web_ui.template_args["extended_csv_files"] = [
        {"href": f"./loadwatch/download/{key}", "title": title} for key, (title, _path) in files.items()]

    @web_ui.app.after_request
    def add_charts_to_the_page(response):
        # Locust's page only: not its HTML report, which is saved and opened elsewhere.
        if not (request.endpoint or "").endswith("index") or response.mimetype != "text/html" \
                or response.direct_passthrough or response.status_code != 200:
            return response
        page = response.get_data(as_text=True)
        if "</body>" in page and SCRIPTS not in page:
            response.set_data(page.replace("</body>", SCRIPTS + "</body>", 1))
        return response

    return history


def install(environment, state: RunState, registry: CollectorRegistry, settings: Callable[[], LoadSettings],
            user_count: Callable[[], int]) -> None:
    web_ui = environment.web_ui
    options = environment.parsed_options
    if getattr(options, "web_login", False):
        login.install(web_ui, getattr(options, "web_base_path", "") or "")
    editable = frozenset(ui_extra_args_dict())

    @web_ui.app.before_request
    def guard_swarm():
        if request.method != "POST" or not (request.endpoint or "").endswith("swarm"):
            return None
        problem = refusal(request.form, editable)
        if problem is None:
            return None
        return jsonify({"success": False, "message": problem, "host": environment.host}), 400

    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": k, "title": t} for k, t in COLUMNS]}
    ]

    cached: list = [0.0, []]  # when, rows: one computation a second however many browsers poll

    @web_ui.app.after_request
    def add_llm_rows(response):
        if request.path != "/stats/requests" or response.status_code != 200:
            return response
        if time.monotonic() - cached[0] >= TAB_REFRESH_SECONDS:
            cached[:] = [time.monotonic(), tab_rows(state)]
        body = response.get_json()
        body["extended_stats"] = [{"key": TAB_KEY, "data": cached[1]}]
        response.set_data(json.dumps(body))
        return response

    @web_ui.app.route("/metrics")
    @web_ui.auth_required_if_enabled
    def metrics():
        return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)

    install_cockpit(web_ui, state, settings, user_count)
