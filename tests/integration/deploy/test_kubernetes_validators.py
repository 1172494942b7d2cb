"""deploy/kubernetes through the command-line validators: kubernetes-validate and promtool."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.conftest import REPO
from tests.unit.deploy.test_kubernetes import by_kind

KUSTOMIZE = REPO / "deploy" / "kubernetes"


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
