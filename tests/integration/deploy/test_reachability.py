"""Who may reach whom in the rendered manifests, held against the flows the stack needs: every needed
flow open and every other closed, in the base and in the fleet overlay. The NetworkPolicies are
evaluated by tests/integration/deploy/reachability.py (a small model of their rules: no library here
evaluates them). Prometheus is kube-prometheus-stack's, in its own namespace; two strangers (a pod of
the namespace with another label, and one of another namespace) must reach nothing.

Before this test the master's initContainer waited on vLLM's 8000, which only the workers and
Prometheus could open: wherever policies are enforced the master never started."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO
from tests.docs_blocks import shell_lines
from tests.integration.deploy.reachability import Cluster, Pod
from tests.integration.deploy.test_kubernetes_validators import KUSTOMIZE, render

PROMETHEUS = Pod("prometheus", "monitoring", (("app.kubernetes.io/name", "prometheus"),))
STRANGERS = [Pod("stranger", "loadwatch", (("app.kubernetes.io/name", "other"),)),
             Pod("stranger-elsewhere", "default", (("app.kubernetes.io/name", "locust-worker"),))]

# (source, destination, why): a destination is a URL through a Service, or POD:PORT-NAME for a pod
# reached at its own address (Prometheus' monitors, a router's service discovery).
BOTH = [
    ("locust-worker", "http://locust-master:5557", "each worker connects to the master"),
    ("locust-master", "http://vllm-sidecars:9647", "the LLM tab reads each engine's sidecar"),
    ("prometheus", "vllm:sidecar", "the ServiceMonitor: the sidecar"),
    ("prometheus", "vllm:http", "the ServiceMonitor: vLLM's own /metrics"),
    ("prometheus", "locust-master:metrics", "the PodMonitor: client latency"),
]
NEEDED = {
    "base": [
        *BOTH,
        ("locust-master", "http://vllm:8000", "its initContainer waits for vLLM's /health"),
        ("locust-worker", "http://vllm:8000", "its initContainer waits; then its users send"),
    ],
    "fleet": [
        *BOTH,
        ("locust-master", "http://vllm-router:8000", "its initContainer waits for the router's /health"),
        ("locust-worker", "http://vllm-router:8000", "its initContainer waits; then its users send"),
        ("vllm-router", "vllm:http", "the router sends to each replica it discovers"),
        ("loadwatch", "http://vllm-router:8000", "the load host's requests and the router's list"),
        ("loadwatch", "http://vllm-router:29000", "the load host reads the router's metrics"),
        ("loadwatch", "vllm:http", "the load host reads each listed replica's /metrics"),
        ("prometheus", "vllm-router:sidecar", "the ServiceMonitor: the router's sidecar"),
    ],
}
OVERLAYS = {"base": KUSTOMIZE / "base", "fleet": KUSTOMIZE / "fleet"}
URL = re.compile(r"https?://([a-z0-9-]+):(\d+)")


@pytest.fixture(scope="module")
def clusters() -> dict[str, Cluster]:
    return {name: Cluster(render(folder), [PROMETHEUS, *STRANGERS]) for name, folder in OVERLAYS.items()}


def resolve(cluster: Cluster, destination: str) -> list[tuple[Pod, int]]:
    """The pods and the port a destination opens."""
    if "://" in destination:
        pods, port = cluster.behind(destination)
        return [(pod, port) for pod in pods]
    name, _, port_name = destination.partition(":")
    pod = cluster.pod(name)
    number = pod.port(port_name)
    assert number is not None, f"{name} has no port named {port_name}"
    return [(pod, number)]


def needed(cluster: Cluster, overlay: str) -> set[tuple[str, str, int]]:
    return {(source, pod.name, port) for source, destination, _ in NEEDED[overlay]
            for pod, port in resolve(cluster, destination)}


@pytest.mark.needs("kubectl")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_flow_the_stack_needs_is_open(clusters, overlay):
    cluster = clusters[overlay]
    closed = [f"{source} -> {destination} ({why})" for source, destination, why in NEEDED[overlay]
              for pod, port in resolve(cluster, destination)
              if not cluster.open(cluster.pod(source), pod, port)]
    assert not closed, f"{overlay}: the policies close flows the stack needs:\n" + "\n".join(closed)


@pytest.mark.needs("kubectl")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_other_flow_is_closed(clusters, overlay):
    """Every pod's every named port, from every pod (Prometheus and the strangers too)."""
    cluster = clusters[overlay]
    wanted = needed(cluster, overlay)
    extra = [f"{source.name} -> {destination.name}:{port}" for source in cluster.pods
             for destination in cluster.pods if destination is not source
             for _, port in destination.ports
             if cluster.open(source, destination, port) and (source.name, destination.name, port) not in wanted]
    assert not extra, f"{overlay}: open, and needed by nothing:\n" + "\n".join(extra)


@pytest.mark.needs("kubectl")
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_address_a_pod_is_given_is_a_needed_flow(clusters, overlay):
    """Each URL in a container's or initContainer's command line is in NEEDED: a new one cannot slip past
    the table."""
    cluster = clusters[overlay]
    listed = {(source, destination) for source, destination, _ in NEEDED[overlay] if "://" in destination}
    for pod in cluster.pods:
        for container in pod.spec.get("containers", []) + pod.spec.get("initContainers", []):
            for word in container.get("command", []) + container.get("args", []):
                for host, port in URL.findall(word):
                    if host in ("127.0.0.1", "0.0.0.0", "localhost"):
                        continue
                    assert (pod.name, f"http://{host}:{port}") in listed, \
                        f"{overlay}: {pod.name}/{container['name']} reaches http://{host}:{port}, not in NEEDED"


@pytest.mark.needs("kubectl")
def test_the_fleet_pages_commands_reach_what_they_name(clusters):
    """fleet.md's own-fleet commands on the cluster: each Service and port they name exists in the
    rendered manifests, and the pod they run in (`kubectl exec deploy/NAME`) may open it."""
    cluster = clusters["fleet"]
    page = REPO / "docs" / "guides" / "fleet.md"
    checked = 0
    for _, line, elsewhere in shell_lines(page):
        found = re.search(r"kubectl -n loadwatch exec deploy/([a-z-]+) -- (.*)", line)
        if elsewhere != "a cluster" or not found:
            continue
        source = cluster.pod(found[1])
        for host, port in URL.findall(found[2]):
            for pod, number in resolve(cluster, f"http://{host}:{port}"):
                assert cluster.open(source, pod, number), f"fleet.md: {found[1]} cannot open {host}:{port}"
                checked += 1
    assert checked >= 2, "fleet.md runs no loadwatch command in the cluster"


def test_the_model_closes_a_flow_no_rule_opens():
    """The model itself: a default deny closes, a rule opens only its port to its peers, a namespace
    selector alone admits every pod of the namespaces it matches."""
    deny = {"kind": "NetworkPolicy", "metadata": {"name": "deny", "namespace": "n"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    allow = {"kind": "NetworkPolicy", "metadata": {"name": "allow", "namespace": "n"},
             "spec": {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"],
                      "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}},
                                            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name":
                                                                                   "ops"}}}],
                                   "ports": [{"port": "sql"}]}]}}
    db = Pod("db", "n", (("app", "db"),), (("sql", 5432), ("admin", 8080)))
    web, other = Pod("web", "n", (("app", "web"),)), Pod("other", "n", (("app", "other"),))
    ops, web_elsewhere = Pod("ops", "ops", (("app", "anything"),)), Pod("web2", "m", (("app", "web"),))
    cluster = Cluster([deny, allow], [db, web, other, ops, web_elsewhere])
    assert cluster.open(web, db, 5432) and cluster.open(ops, db, 5432)
    assert not cluster.open(web, db, 8080) and not cluster.open(other, db, 5432)
    assert not cluster.open(web_elsewhere, db, 5432)  # a podSelector alone: the policy's namespace only
    assert not cluster.open(db, web, 80)  # the default deny
    assert Cluster([allow], [db, web, other]).open(db, web, 80)  # a pod no policy selects allows all
