"""deploy/kubernetes as a cluster receives it: every overlay rendered by `kubectl kustomize`, the
built-in kinds through kubernetes-validate, the Operator's kinds checked for the fields the
Operator requires (no schema for them here), and their rules through promtool."""

from __future__ import annotations

import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from tests.conftest import REPO
from tests.unit.deploy.test_kubernetes import OPERATOR_KINDS

KUSTOMIZE = REPO / "deploy" / "kubernetes"
OVERLAYS = {"with the Operator": KUSTOMIZE, "base": KUSTOMIZE / "base"}
# The fields the Operator's CRDs (monitoring.coreos.com/v1) require, and what each endpoint needs to be scraped.
REQUIRED = {"ServiceMonitor": ("selector", "endpoints"), "PodMonitor": ("selector", "podMetricsEndpoints"),
            "PrometheusRule": ("groups",)}


def render(folder) -> list[dict]:
    built = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    return [d for d in yaml.safe_load_all(built.stdout) if d]


@pytest.mark.needs("kubectl")
@pytest.mark.parametrize("overlay", OVERLAYS, ids=list(OVERLAYS))
def test_every_overlay_renders_and_its_core_objects_validate(overlay):
    objects = render(OVERLAYS[overlay])
    core = [d for d in objects if d["kind"] not in OPERATOR_KINDS]
    for doc in core:
        try:
            kubernetes_validate.validate(doc, "1.30.0", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}")
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "loadwatch", doc["metadata"]["name"]
    assert len(core) >= 10
    operator = {d["kind"] for d in objects if d["kind"] in OPERATOR_KINDS}
    assert operator == (OPERATOR_KINDS if overlay == "with the Operator" else set())


@pytest.mark.needs("kubectl")
def test_the_operators_objects_carry_their_required_fields_and_the_release_label():
    objects = [d for d in render(KUSTOMIZE) if d["kind"] in OPERATOR_KINDS]
    for doc in objects:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        assert doc["apiVersion"] == "monitoring.coreos.com/v1", where
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack", where
        assert doc["metadata"]["namespace"] == "loadwatch", where
        for field in REQUIRED[doc["kind"]]:
            assert doc["spec"][field], f"{where}: spec.{field}"
        for endpoint in doc["spec"].get("endpoints", []) + doc["spec"].get("podMetricsEndpoints", []):
            assert endpoint["port"] and endpoint["path"] == "/metrics", where
        for group in doc["spec"].get("groups", []):
            assert group["name"] and group["rules"], where
            for rule in group["rules"]:
                assert rule["expr"] and ("record" in rule) != ("alert" in rule), where


@pytest.mark.needs("kubectl")
@pytest.mark.needs("promtool")
def test_the_rendered_prometheus_rule_carries_every_rule_and_passes_promtool(tmp_path):
    (rule,) = [d for d in render(KUSTOMIZE) if d["kind"] == "PrometheusRule"]
    sources = [yaml.safe_load(p.read_text()) for p in sorted((REPO / "prometheus" / "rules").glob("*.yml"))]
    assert rule["spec"]["groups"] == [g for s in sources for g in s["groups"]]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_command_line_validator_agrees():
    files = [str(KUSTOMIZE / "base" / name) for name in ("namespace.yaml", "vllm.yaml", "locust.yaml")]
    run = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", "-k", "1.30.0", *files],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
