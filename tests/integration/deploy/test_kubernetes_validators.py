"""deploy/kubernetes as a cluster receives it: every overlay rendered by `kubectl kustomize`, the
built-in kinds through kubernetes-validate, the Operator's kinds checked for the fields the
Operator requires (no schema for them here), and their rules through promtool."""

from __future__ import annotations

import shutil
import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from loadwatch import cli
from loadwatch.capacity import autoscale
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_package
from loadwatch.exporter.settings import build_settings
from loadwatch.fleet.routers import VllmRouter
from loadwatch.metrics.capacity import Autoscaling
from loadwatch.settings import LoadSettings
from tests.conftest import REPO
from tests.unit.deploy.test_kubernetes import OPERATOR_KINDS

KUSTOMIZE = REPO / "deploy" / "kubernetes"
OVERLAYS = {"with the Operator": KUSTOMIZE, "base": KUSTOMIZE / "base", "fleet": KUSTOMIZE / "fleet"}
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
    assert operator == (set() if overlay == "base" else OPERATOR_KINDS)


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


def named(objects: list[dict], kind: str, name: str) -> dict:
    return next(d for d in objects if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.mark.needs("kubectl")
def test_the_fleets_requests_are_named_by_the_pod_that_served_them_and_the_router_finds_the_pods():
    objects = render(OVERLAYS["fleet"])
    vllm = named(objects, "Deployment", "vllm")
    assert vllm["spec"]["replicas"] == 2
    pod = vllm["spec"]["template"]
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    engine, sidecar = containers["vllm"], containers["loadwatch-sidecar"]
    # vLLM says its pod's name in every answer, the name its sidecar gives its series.
    args = engine["args"]
    assert args[args.index("--fingerprint-mode") + 1] == "custom"
    assert args[args.index("--fingerprint-value") + 1] == "$(POD_NAME)"
    assert {e["name"]: e for e in engine["env"]}["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert sidecar["args"][sidecar["args"].index("--target") + 1].startswith("$(POD_NAME)=")
    # Locust sends to the router and takes the Deployment's pods as its replicas, by their names.
    master = named(objects, "Deployment", "locust-master")["spec"]["template"]["spec"]
    command = master["containers"][0]["args"]
    service = named(objects, "Service", "vllm-router")
    port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "http")
    assert command[command.index("-H") + 1] == f"http://vllm-router:{port}"
    replicas = [command[i + 1] for i, a in enumerate(command) if a == "--replica"]
    names = LoadSettings(replica=replicas).replica_names()
    assert names.name("vllm-5d8c7b9f4-x2x7k") and not names.name("other-5d8c7b9f4-x2x7k")
    assert not names.name("vllm-0.32.0-4dbb0481"), "vLLM's default fingerprint names no pod"
    for deployment in ("locust-master", "locust-worker"):
        init = named(objects, "Deployment", deployment)["spec"]["template"]["spec"]["initContainers"][0]
        assert init["command"][2] == f"http://vllm-router:{port}/health"
    # The router watches the pods by their label, with a Role that reads pods and nothing else.
    router_pod = named(objects, "Deployment", "vllm-router")["spec"]["template"]
    router = {c["name"]: c for c in router_pod["spec"]["containers"]}["router"]
    selector = router["args"][router["args"].index("--selector") + 1]
    key, _, value = selector.partition("=")
    assert pod["metadata"]["labels"][key] == value
    assert router_pod["spec"]["serviceAccountName"] == "vllm-router"
    role = named(objects, "Role", "vllm-router")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    binding = named(objects, "RoleBinding", "vllm-router")
    assert binding["roleRef"]["name"] == "vllm-router"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "vllm-router", "namespace": "loadwatch"}]
    # The router's sidecar is scraped as the replicas' are (job loadwatch-engine).
    monitor = named(objects, "ServiceMonitor", "vllm-router")
    assert monitor["spec"]["selector"]["matchLabels"] == router_pod["metadata"]["labels"]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["sidecar"]
    # Whether the router may reach the replicas: test_reachability.py, from every policy.
    # The router's own parser takes its command; the sidecar's takes a router alone.
    settings = EngineSettings()
    ensure_package(settings, VllmRouter.requirement)
    checked = subprocess.run([str(settings.python), "-c", "import sys; from vllm_router.launch_router import "
                              "parse_router_args; parse_router_args(sys.argv[1:])", *router["args"]],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    router_sidecar = {c["name"]: c for c in router_pod["spec"]["containers"]}["loadwatch-sidecar"]
    args = cli.parser(light=True).parse_args(["exporter", *router_sidecar["args"]])
    sidecar_settings = build_settings(args.target, args.targets_file, args.router, port=args.port, host=args.host)
    assert [r.name for r in sidecar_settings.routers] == ["vllm-router"] and not sidecar_settings.targets


@pytest.mark.needs("kubectl")
def test_every_image_is_pulled_from_your_registry_once_each_listed_image_is_named(tmp_path):
    """As kubernetes.md and fleet.md say: name every loadwatch image each kustomization lists (`images:`)
    after your registry. Every loadwatch image of every overlay then comes from it: one left behind (the
    router's sidecar, whose image the base's `images:` do not reach) would end in ImagePullBackOff."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(KUSTOMIZE, copy)
    for kustomization in copy.rglob("kustomization.yaml"):
        doc = yaml.safe_load(kustomization.read_text())
        for image in doc.get("images", []):
            if image["name"].startswith("loadwatch"):
                image["newName"] = f"registry.example/{image['name']}"
        kustomization.write_text(yaml.safe_dump(doc, sort_keys=False))
    for overlay in ("", "base", "fleet"):
        pods = [d["spec"]["template"]["spec"] for d in render(copy / overlay) if d["kind"] == "Deployment"]
        images = {c["image"] for pod in pods for c in pod["containers"] + pod.get("initContainers", [])}
        left = sorted(i for i in images if i.startswith("loadwatch"))
        assert not left, f"{overlay or 'with the Operator'}: still pulled from nowhere: {left}"


FOUND = {  # capacity's autoscaling rule as capacity.json holds it (capacity/autoscale.rule)
    "in the engine": {"signal": "requests in the engine", "metric": autoscale.IN_ENGINE, "threshold": 6.5,
                      "per_replica": True, "held_level": 6.0, "broken_level": 8.0, "at_broken_level": 20.0,
                      "separates": True, "replicas_measured": 2,
                      "query": autoscale.IN_ENGINE_SIGNAL.query('{namespace="loadwatch"}')},
    "KV cache": {"signal": "KV cache usage", "metric": autoscale.KV_SIGNAL.metric, "threshold": 0.85,
                 "per_replica": False, "held_level": 6.0, "broken_level": None, "at_broken_level": None,
                 "separates": False, "replicas_measured": 2,
                 "query": autoscale.KV_SIGNAL.query('{namespace="loadwatch"}')},
}


@pytest.mark.needs("kubectl")
@pytest.mark.needs("promtool")
@pytest.mark.parametrize("signal", FOUND, ids=list(FOUND))
def test_the_autoscaling_rule_validates_as_keda_and_kubernetes_take_it_and_scales_the_shipped_vllm(tmp_path, signal):
    from cloudcoil.models.keda.v1alpha1 import ScaledObject

    found = Autoscaling.model_validate(FOUND[signal])
    files = {p.name: yaml.safe_load(p.read_text()) for p in autoscale.write(tmp_path, found, 4)}
    hpa, keda = files["hpa.yaml"], files["keda-scaledobject.yaml"]
    kubernetes_validate.validate(hpa, "1.30.0", strict=True)
    # KEDA 2.16's CRD as pydantic models: a missing or mistyped field fails; a key they do not know is
    # dropped, so the round trip would differ.
    assert ScaledObject.model_validate(keda).model_dump(by_alias=True, exclude_unset=True, mode="json") == keda
    deployments = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in render(KUSTOMIZE / "fleet")
                   if d["kind"] == "Deployment"}
    for doc, name in ((hpa, hpa["spec"]["scaleTargetRef"]["name"]), (keda, keda["spec"]["scaleTargetRef"]["name"])):
        assert (doc["metadata"]["namespace"], name) in deployments
    # The queries parse as Prometheus parses them: KEDA's, and the adapter's with its placeholders filled.
    adapter = files["prometheus-adapter-rules.yaml"]["rules"][0]
    filled = adapter["metricsQuery"].replace("<<.GroupBy>>", "namespace, pod").replace(
        "<<.LabelMatchers>>", 'namespace="loadwatch"')
    rules = tmp_path / "queries.yml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "autoscaling", "rules": [
        {"record": "keda", "expr": keda["spec"]["triggers"][0]["metadata"]["query"]},
        {"record": "adapter", "expr": filled}]}]}))
    check = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == adapter["name"]["as"]
