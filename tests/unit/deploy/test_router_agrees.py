"""One home for each fact of the deployed vllm-router: VllmRouter (src/loadwatch/fleet/routers.py) pins
its version and spells its options; the image (deploy/router/Dockerfile), docker-compose.fleet.yml and
the Kubernetes fleet component must say the same, or the router a user deploys is not the one
loadwatch's fleet tests ran against. Each assertion below fails on drift in one of them."""

from __future__ import annotations

import re

import yaml

from loadwatch.fleet.routers import VllmRouter
from loadwatch.tune.output import POLICY_ARG
from tests.conftest import REPO
from tests.unit.deploy.test_image_builds import ComposeLoader

DOCKERFILE = REPO / "deploy" / "router" / "Dockerfile"
COMPOSE = REPO / "docker-compose.fleet.yml"
FLEET = REPO / "deploy" / "kubernetes" / "components" / "fleet"
IMAGE = "loadwatch-vllm-router"
PORT, METRICS_PORT = 8000, 29000  # clients' port (the one they used for vLLM), Prometheus' (the sidecar reads it)
# Kubernetes' router finds the Deployment's pods itself instead of --worker-urls: `kubectl scale` adds
# and removes pods, and a fixed list would keep sending to gone ones and never to new ones.
DISCOVERY = ["--service-discovery", "--selector", "app.kubernetes.io/name=vllm",
             "--service-discovery-namespace", "$(POD_NAMESPACE)", "--service-discovery-port", str(PORT)]


def compose_router() -> dict:
    return yaml.load(COMPOSE.read_text(), Loader=ComposeLoader)["services"]["router"]


def kubernetes_router() -> dict:
    """The router's container in the fleet component's vllm-router Deployment."""
    docs = yaml.safe_load_all((FLEET / "router.yaml").read_text())
    (deployment,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "vllm-router"]
    return {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}["router"]


def test_the_image_installs_the_version_the_class_pins_and_is_tagged_with_it():
    (arg,) = re.findall(r"^ARG VLLM_ROUTER_VERSION=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert arg == VllmRouter.version and VllmRouter.requirement == f"vllm-router=={VllmRouter.version}"
    assert compose_router()["image"] == f"{IMAGE}:{VllmRouter.version}"
    images = {i["name"]: i for i in yaml.safe_load((FLEET / "kustomization.yaml").read_text())["images"]}
    assert images[IMAGE]["newTag"] == VllmRouter.version


def test_compose_starts_the_router_with_the_classs_arguments_in_front_of_both_replicas():
    # The policy is the user's (ROUTER_POLICY in .env), the class's default where none is set.
    policy = f"${{ROUTER_POLICY:-{VllmRouter.default_policy}}}"
    assert compose_router()["command"] == VllmRouter().arguments(
        "0.0.0.0", PORT, METRICS_PORT, ["http://vllm:8000", "http://vllm-b:8000"], policy, [])


def test_kubernetes_starts_the_router_with_the_classs_arguments_finding_the_pods_itself():
    args = kubernetes_router()["args"]
    assert args == VllmRouter().arguments("0.0.0.0", PORT, METRICS_PORT, [], VllmRouter.default_policy, DISCOVERY)
    assert args[POLICY_ARG] == "--policy"  # where tune's patch replaces the policy


def test_the_router_is_probed_where_the_class_awaits_it():
    container = kubernetes_router()
    assert container["readinessProbe"]["httpGet"]["path"] == VllmRouter.health_path
    assert f":{PORT}{VllmRouter.health_path}'" in DOCKERFILE.read_text()  # its HEALTHCHECK, which compose awaits
