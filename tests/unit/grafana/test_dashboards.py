"""Dashboards and provisioning, checked offline: structure, generated files, PromQL syntax."""

from __future__ import annotations

import re

import yaml

from loadwatch.grafana.__main__ import render
from loadwatch.grafana.dashboards import DASHBOARDS
from tests.conftest import REPO
from tests.dashboard_queries import DASHBOARDS as FILES
from tests.dashboard_queries import load, panels

PROVISIONING = REPO / "grafana" / "provisioning"


def test_dashboard_files_are_what_the_generator_writes():
    assert sorted(p.name for p in FILES) == sorted(DASHBOARDS)
    for path in FILES:
        assert path.read_text() == render(DASHBOARDS[path.name]), (
            f"{path.name} drifted from loadwatch.grafana: run `python -m loadwatch.grafana`")


def test_uids_are_stable_and_unique_and_ids_unique_within_each_dashboard():
    dashboards = [load(p) for p in FILES]
    assert [d["uid"] for d in dashboards] == ["loadwatch-engine", "loadwatch-fleet", "loadwatch-overview"]
    for d in dashboards:
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), d["uid"]


def test_datasource_is_the_provisioned_one_through_a_variable():
    provisioned = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yaml").read_text())
    uid = provisioned["datasources"][0]["uid"]
    for path in FILES:
        text = path.read_text()
        assert "${DS_" not in text and "__inputs" not in text, path.name
        dashboard = load(path)
        (ds_var,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
        assert ds_var["current"]["value"] == uid and ds_var["query"] == "prometheus"
        for panel in panels(dashboard):
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])


def test_every_panel_has_a_unit_a_description_and_current_schema():
    for path in FILES:
        dashboard = load(path)
        assert dashboard["schemaVersion"] >= 39
        for panel in panels(dashboard):
            assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
            assert panel["description"], panel["title"]
            assert 0 <= panel["gridPos"]["x"] and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24


def test_rates_follow_grafanas_rate_interval():
    for path in FILES:
        for panel in panels(load(path)):
            for target in panel["targets"]:
                windows = re.findall(r"\[([^\]]+)\]", target["expr"])
                assert windows and set(windows) == {"$__rate_interval"} or not windows, (panel["title"], windows)


def test_the_overview_covers_client_and_engine_side_by_side():
    overview = load(REPO / "grafana" / "dashboards" / "overview.json")
    exprs = " ".join(t["expr"] for p in panels(overview) for t in p["targets"])
    for name in ("loadwatch_client_time_to_first_token_seconds", "loadwatch_engine_time_to_first_token_seconds",
                 "loadwatch_engine_kv_cache_usage_ratio_max", "loadwatch_engine_requests_waiting_max",
                 "loadwatch_engine_prefix_cache_hits_total", "loadwatch_engine_spec_decode_drafts_total",
                 "loadwatch_engine_preemptions_total", "loadwatch_engine_iteration_tokens_bucket",
                 "loadwatch_engine_admission_rejections_total", "loadwatch_engine_request_queue_time_seconds",
                 "loadwatch_client_request_failures_total", "loadwatch_client_requests_in_flight",
                 "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"):
        assert name in exprs, name
    assert {a["name"] for a in overview["annotations"]["list"]} >= {"Load-test stages", "Firing alerts"}


def test_provisioning_points_at_the_dashboards_folder():
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "loadwatch.yaml").read_text())["providers"][0]
    assert provider["type"] == "file" and provider["options"]["path"].endswith("/loadwatch")


def test_latency_panels_on_client_ttft_and_e2e_buckets_show_their_exemplars():
    shown = []
    for path in FILES:
        for panel in panels(load(path)):
            for target in panel.get("targets", []):
                on_buckets = re.search(r"loadwatch_client_(time_to_first_token|e2e_request_latency)_seconds_bucket",
                                       target["expr"])
                assert bool(target.get("exemplar")) == bool(on_buckets), (panel["title"], target["expr"])
                if on_buckets:
                    shown.append(panel["title"])
    assert len(shown) >= 2


def test_engine_series_are_chosen_by_namespace_and_pod_as_kubernetes_labels_them():
    """Replicas of vLLM stay apart: each pod's sidecar names its target after the pod, and a
    dashboard narrows to a namespace and pod (finding 7 of the cluster review)."""
    for path in FILES:
        dashboard = load(path)
        names = [v["name"] for v in dashboard["templating"]["list"]]
        assert {"namespace", "pod"} <= set(names) and names.index("pod") < names.index("target"), path.name
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                if "loadwatch_engine_" in target["expr"]:
                    assert 'pod=~"$pod"' in target["expr"], (path.name, panel["title"])
    annotations = [a for d in map(load, FILES) for a in d["annotations"]["list"] if a.get("name") == "Firing alerts"]
    assert annotations and all('alertname!="Watchdog"' in a["expr"] for a in annotations)
