"""deploy/kubernetes: generated files match their sources, and every manifest is valid."""

from __future__ import annotations

import functools

import kubernetes_validate
import pytest
import yaml

from loadwatch.deploy.kubernetes import GENERATED as GENERATED_PATH
from loadwatch.deploy.kubernetes import generated_files
from tests.conftest import REPO

KUSTOMIZE = REPO / "deploy" / "kubernetes"
GENERATED = REPO / GENERATED_PATH
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}  # CRDs: no schema in kubernetes-validate


@functools.cache  # parsed once: read-only for the tests, and a unit test stays well under a second
def documents() -> list[tuple[str, dict]]:
    kustomization = yaml.safe_load((KUSTOMIZE / "kustomization.yaml").read_text())
    out = []
    for resource in kustomization["resources"]:
        path = KUSTOMIZE / resource
        assert path.is_file(), f"kustomization lists a missing file: {resource}"
        out += [(resource, doc) for doc in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if doc]
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


def containers() -> list[tuple[str, dict, dict]]:
    """(deployment, pod spec, container) of every container."""
    return [(doc["metadata"]["name"], doc["spec"]["template"]["spec"], c) for _, doc in documents()
            if doc["kind"] == "Deployment" for c in doc["spec"]["template"]["spec"]["containers"]]


WRITABLE_ROOT = {"vllm"}  # its libraries write caches and kernels under the image (vllm.yaml says why)


def test_every_container_runs_unprivileged_with_requests_and_a_memory_limit():
    assert len(containers()) == 4
    for deployment, pod, container in containers():
        where = f"{deployment}/{container['name']}"
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", where
        assert pod["automountServiceAccountToken"] is False, where
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"], where
        assert context["readOnlyRootFilesystem"] is (container["name"] not in WRITABLE_ROOT), where
        resources = container["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]) and "memory" in resources["limits"], where


def test_secrets_come_from_the_secret_never_a_literal():
    assert not [doc for _, doc in documents() if doc["kind"] == "Secret"]  # the user creates it (README)
    for deployment, _pod, container in containers():
        for env in container.get("env", []):
            if any(word in env["name"] for word in ("KEY", "TOKEN", "PASSWORD")) and not env["name"].endswith("_FILE"):
                assert "value" not in env and env["valueFrom"]["secretKeyRef"]["name"], (deployment, env["name"])
    vllm = {c["name"]: c for _, _, c in containers()}["vllm"]
    assert {e["name"]: e for e in vllm["env"]}["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "vllm-api-key"
    for name in ("locust-master", "locust-worker"):
        pod = by_kind("Deployment", name)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        key_file = {e["name"]: e["value"] for e in container["env"]}["OPENAI_API_KEY_FILE"]
        mount = next(m for m in container["volumeMounts"] if key_file.startswith(m["mountPath"] + "/"))
        volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
        assert volume["secret"]["secretName"] == "vllm-api-key"
        assert key_file == f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}"


def allowed(port: int) -> list[dict]:
    """The peers every NetworkPolicy lets reach `port`."""
    return [peer for _, doc in documents() if doc["kind"] == "NetworkPolicy"
            for rule in doc["spec"].get("ingress", []) if port in [p["port"] for p in rule["ports"]]
            for peer in rule["from"]]


def test_network_policies_deny_by_default_and_open_each_port_to_its_client_only():
    deny = by_kind("NetworkPolicy", "default-deny-ingress")["spec"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and "ingress" not in deny
    worker = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "locust-worker"}}}
    prometheus = {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}
    assert allowed(5557) == [worker]
    master = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "locust-master"}}}
    assert allowed(9646) == [prometheus] and allowed(9647) == [master, prometheus]  # master: the LLM tab's charts
    assert allowed(8000) == [worker, prometheus]
    assert allowed(8089) == []  # the web UI: kubectl port-forward only


def test_a_worker_pod_runs_a_process_per_cpu_of_its_limit():
    """`--processes auto` reads the container's CPU quota: without a CPU limit a pod would fork one
    worker per core of its node while asking for a few."""
    (container,) = by_kind("Deployment", "locust-worker")["spec"]["template"]["spec"]["containers"]
    assert container["args"][-2:] == ["--processes", "auto"] and "--worker" in container["args"]
    assert container["resources"]["limits"]["cpu"] == container["resources"]["requests"]["cpu"]
