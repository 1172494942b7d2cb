"""The "LLM" tab of Locust's web UI and its /metrics route."""

from __future__ import annotations

import json

from flask import Response, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from loadwatch.loadgen.state import RunState
from loadwatch.metrics.results import Figures
from loadwatch.metrics.summary import figures

TAB_KEY = "llm"
COLUMNS = [
    ("name", "Scenario (model)"),
    ("requests", "Requests"),
    ("failures", "Failures"),
    *[(f"{m}_{p}", f"{m.upper()} {p} (ms)") for m in ("ttft", "tpot", "itl", "e2el") for p in ("p50", "p90", "p99")],
    ("output_throughput", "Output tok/s"),
]


def tab_rows(state: RunState) -> list[dict]:
    rows = []
    for (model, scenario), series in sorted(state.recorder.samples.by_labels.items()):
        f = Figures.model_validate(figures(series, []))
        row = {"name": f"{scenario} ({model})", "requests": f.completed + f.failed, "failures": f.failed}
        for key, _title in COLUMNS[3:-1]:
            metric, p = key.split("_")
            value = f.latency(metric, p)
            row[key] = "" if value is None else round(value, 1)
        row["output_throughput"] = round(f.output_throughput, 1)
        rows.append(row)
    return rows


def install(environment, state: RunState, registry: CollectorRegistry) -> None:
    web_ui = environment.web_ui
    web_ui.template_args["extended_tabs"] = [{"title": "LLM", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [
        {"key": TAB_KEY, "structure": [{"key": k, "title": t} for k, t in COLUMNS]}
    ]

    @web_ui.app.after_request
    def add_llm_rows(response):
        if request.path != "/stats/requests" or response.status_code != 200:
            return response
        body = response.get_json()
        body["extended_stats"] = [{"key": TAB_KEY, "data": tab_rows(state)}]
        response.set_data(json.dumps(body))
        return response

    @web_ui.app.route("/metrics")
    def metrics():
        return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)
