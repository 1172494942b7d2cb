"""Run and stage annotations posted to Grafana (grafana-client), from a run's results JSON.

They are organisation-wide and tagged `loadwatch`; the dashboards show them through an annotation
query on that tag, so they appear on every loadwatch dashboard (and any other that asks).
"""

from __future__ import annotations

from grafana_client import GrafanaApi
from grafana_client.client import GrafanaException
from niquests.exceptions import RequestException

from loadwatch.metrics.results import Figures, Results

TAG = "loadwatch"


class AnnotateError(Exception):
    """Grafana could not be reached or refused an annotation; the message says which."""


def run_annotations(results: Results) -> list[dict]:
    """The run as one region and each load-shape stage as another, with the figures people look for."""
    run_id = results.run_id

    def summary(figures: Figures) -> str:
        p99 = figures.latency("ttft", "p99")
        return (f"{figures.completed} requests, {figures.failed} failed, "
                f"{figures.request_throughput:.2f} req/s, TTFT p99 "
                + ("n/a" if p99 is None else f"{p99:.0f} ms"))

    out = [{
        "time_from": int(results.started_at * 1000), "time_to": int(results.ended_at * 1000),
        "tags": [TAG, "run", run_id],
        "text": f"loadwatch run {run_id} against {results.target or 'n/a'}: {summary(results)}",
    }]
    for stage in results.stages:
        out.append({
            "time_from": int(stage.start * 1000), "time_to": int(stage.end * 1000),
            "tags": [TAG, "stage", stage.name, run_id],
            "text": f"stage {stage.name} at {stage.level:g} {stage.unit}: {summary(stage)}",
        })
    return out


def post_annotations(url: str, token: str | None, results: Results, timeout: float = 10.0) -> int:
    """Post them all; how many Grafana took."""
    api = GrafanaApi.from_url(url, credential=token, timeout=timeout)
    posted = 0
    for annotation in run_annotations(results):
        try:
            api.annotations.add_annotation(**annotation)
        except GrafanaException as exc:
            said = exc.response.get("message") if isinstance(exc.response, dict) else None
            raise AnnotateError(f"Grafana at {url} refused the annotation ({exc.status_code}): "
                                f"{said or exc.message}; {posted} posted before it") from None
        except RequestException as exc:
            raise AnnotateError(f"cannot reach Grafana at {url}: {exc}") from None
        posted += 1
    return posted
