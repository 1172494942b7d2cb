"""deploy/kubernetes: generated files match their sources, and every manifest is valid."""

from __future__ import annotations

import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from loadwatch.deploy.kubernetes import GENERATED as GENERATED_PATH
from loadwatch.deploy.kubernetes import generated_files
from tests.conftest import REPO

KUSTOMIZE = REPO / "deploy" / "kubernetes"
GENERATED = REPO / GENERATED_PATH
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}  # CRDs: no schema in kubernetes-validate


def documents() -> list[tuple[str, dict]]:
    kustomization = yaml.safe_load((KUSTOMIZE / "kustomization.yaml").read_text())
    out = []
    for resource in kustomization["resources"]:
        path = KUSTOMIZE / resource
        assert path.is_file(), f"kustomization lists a missing file: {resource}"
        out += [(resource, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


def by_kind(kind: str, name: str) -> dict:
    return next(doc for _, doc in documents() if doc["kind"] == kind and doc["metadata"]["name"] == name)


def test_generated_files_match_their_sources():
    expected = generated_files()
    assert sorted(p.name for p in GENERATED.iterdir()) == sorted(expected)
    for name, text in expected.items():
        assert (GENERATED / name).read_text() == text, f"{name} drifted: run `python -m loadwatch.deploy`"


def test_builtin_kinds_pass_kubernetes_validate_strictly():
    checked = 0
    for resource, doc in documents():
        if doc["kind"] in OPERATOR_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, "1.30.0", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{resource} {doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}")
        checked += 1
    assert checked >= 7


def test_the_command_line_validator_agrees(tmp_path):
    files = [str(KUSTOMIZE / name) for name in ("namespace.yaml", "vllm.yaml", "locust.yaml")]
    run = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", "-k", "1.30.0", *files],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_prometheus_rule_carries_every_rule_and_passes_promtool(tmp_path):
    rule = by_kind("PrometheusRule", "loadwatch")
    sources = [yaml.safe_load(p.read_text()) for p in sorted((REPO / "prometheus" / "rules").glob("*.yml"))]
    assert rule["spec"]["groups"] == [g for s in sources for g in s["groups"]]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_dashboards_are_configmaps_for_the_grafana_sidecar():
    for path in sorted((REPO / "grafana" / "dashboards").glob("*.json")):
        cm = by_kind("ConfigMap", f"loadwatch-dashboard-{path.stem}")
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["data"][path.name] == path.read_text()


def test_monitors_select_what_the_manifests_expose():
    locust_ports = {p["name"] for p in by_kind("Service", "locust-master")["spec"]["ports"]}
    assert locust_ports == {"web", "master", "metrics"}
    vllm_pod = by_kind("Deployment", "vllm")["spec"]["template"]
    containers = {c["name"]: c for c in vllm_pod["spec"]["containers"]}
    assert "--target" in containers["loadwatch-sidecar"]["args"]
    assert containers["vllm"]["resources"]["limits"]["nvidia.com/gpu"] == 1
    service_monitor = by_kind("ServiceMonitor", "vllm")
    assert service_monitor["spec"]["selector"]["matchLabels"] == vllm_pod["metadata"]["labels"]
    service_ports = {p["name"] for p in by_kind("Service", "vllm")["spec"]["ports"]}
    assert {e["port"] for e in service_monitor["spec"]["endpoints"]} <= service_ports
    pod_monitor = by_kind("PodMonitor", "locust-master")
    master_pod = by_kind("Deployment", "locust-master")["spec"]["template"]
    assert pod_monitor["spec"]["selector"]["matchLabels"] == master_pod["metadata"]["labels"]
    master_ports = {p["name"] for c in master_pod["spec"]["containers"] for p in c["ports"]}
    assert {e["port"] for e in pod_monitor["spec"]["podMetricsEndpoints"]} <= master_ports
    # The jobs the dashboards and rules expect, as prometheus.yml names them.
    jobs = {r["replacement"] for e in service_monitor["spec"]["endpoints"] + pod_monitor["spec"]["podMetricsEndpoints"]
            for r in e["relabelings"] if r["targetLabel"] == "job"}
    prometheus = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    assert jobs == {j["job_name"] for j in prometheus["scrape_configs"]} - {"dcgm"}
