"""Who may open which port of whom, from rendered Kubernetes objects and their NetworkPolicies.

No library here evaluates NetworkPolicies (kubernetes-validate checks their schema, not their effect),
so this is a small model of the rules of networking.k8s.io/v1, written by hand:

- A pod that no policy of its namespace selects for a direction (policyTypes) allows all of it.
- A pod that policies select allows, in that direction, the union of their rules: a rule admits a peer
  when one of its `from`/`to` entries matches (none: every peer) on one of its `ports` (none: every
  port). A port is a number or the name of a container port of the pod being reached.
- A peer entry: `podSelector` alone matches pods of the policy's own namespace; `namespaceSelector`
  alone, every pod of the namespaces it matches; both, the pods it matches in those namespaces. A
  namespace carries the label kubernetes.io/metadata.name with its name. `ipBlock` matches no pod.
- A flow is open when the source's egress and the destination's ingress both allow it.

Left out, as they decide nothing in loadwatch's manifests: protocols other than TCP, named ports on
egress rules, and traffic from the node (kubelet probes), which policies do not govern.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job")


@dataclass(frozen=True)
class Pod:
    name: str  # its workload's name, or a name for a pod outside the manifests (Prometheus)
    namespace: str
    labels: tuple[tuple[str, str], ...]
    ports: tuple[tuple[str, int], ...] = ()  # its containers' named ports
    spec: dict = field(default_factory=dict, compare=False, hash=False)

    def port(self, port: int | str) -> int | None:
        return port if isinstance(port, int) else dict(self.ports).get(port)


def matches(selector: dict | None, labels: dict[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions); an empty one matches everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[operator]
        if not ok:
            return False
    return True


class Cluster:
    """The pods of rendered objects (plus pods from outside them, such as a cluster's Prometheus), their
    Services and NetworkPolicies, and `open`: whether one pod may open a port of another."""

    def __init__(self, objects: list[dict], outside: list[Pod], namespace_labels: dict[str, dict] | None = None):
        self.pods = [*self.workload_pods(objects), *outside]
        self.services = {d["metadata"]["name"]: d for d in objects if d["kind"] == "Service"}
        self.policies = [d for d in objects if d["kind"] == "NetworkPolicy"]
        self.namespace_labels = namespace_labels or {}

    @staticmethod
    def workload_pods(objects: list[dict]) -> list[Pod]:
        pods = []
        for doc in objects:
            if doc["kind"] not in WORKLOADS:
                continue
            template = doc["spec"]["template"]
            spec = template["spec"]
            ports = tuple((p["name"], p["containerPort"]) for c in spec.get("containers", [])
                          for p in c.get("ports", []) if "name" in p)
            pods.append(Pod(doc["metadata"]["name"], doc["metadata"]["namespace"],
                            tuple(sorted(template["metadata"]["labels"].items())), ports, spec))
        return pods

    def pod(self, name: str) -> Pod:
        return next(p for p in self.pods if p.name == name)

    def _namespace_matches(self, selector: dict, namespace: str) -> bool:
        labels = {**self.namespace_labels.get(namespace, {}), "kubernetes.io/metadata.name": namespace}
        return matches(selector, labels)

    def _peer_matches(self, peer: dict, policy_namespace: str, pod: Pod) -> bool:
        if "ipBlock" in peer:
            return False
        if "namespaceSelector" in peer:
            if not self._namespace_matches(peer["namespaceSelector"], pod.namespace):
                return False
        elif pod.namespace != policy_namespace:
            return False
        return matches(peer.get("podSelector"), dict(pod.labels))

    def _allows(self, pod: Pod, direction: str, peer: Pod, port: int, named_on: Pod) -> bool:
        """Whether `pod`'s policies of `direction` (Ingress, Egress) let `peer` in or out on `port`
        (a named port is looked up on `named_on`, the pod reached)."""
        rules_key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        selecting = [p for p in self.policies if p["metadata"]["namespace"] == pod.namespace
                     and matches(p["spec"].get("podSelector"), dict(pod.labels))
                     and direction in p["spec"].get("policyTypes", ["Ingress"])]
        if not selecting:
            return True
        for policy in selecting:
            for rule in policy["spec"].get(rules_key) or []:
                peers = rule.get(peers_key)
                if peers and not any(self._peer_matches(e, policy["metadata"]["namespace"], peer) for e in peers):
                    continue
                ports = rule.get("ports")
                if not ports or any(self._port_matches(p, port, named_on) for p in ports):
                    return True
        return False

    @staticmethod
    def _port_matches(rule: dict, port: int, pod: Pod) -> bool:
        if rule.get("protocol", "TCP") != "TCP":
            return False
        first = pod.port(rule["port"]) if "port" in rule else None
        if "port" not in rule:
            return True
        if first is None:
            return False
        return first <= port <= rule.get("endPort", first)

    def open(self, source: Pod, destination: Pod, port: int) -> bool:
        return self._allows(destination, "Ingress", source, port, destination) and \
            self._allows(source, "Egress", destination, port, destination)

    def behind(self, url: str) -> tuple[list[Pod], int]:
        """The pods a URL's Service sends to and the port they are reached on; AssertionError where the
        URL names no Service of the manifests or a port its Service lacks."""
        parts = urlsplit(url)
        service = self.services.get(parts.hostname or "")
        assert service is not None, f"{url}: no Service {parts.hostname} in the manifests"
        port = parts.port or 80
        entry = next((p for p in service["spec"]["ports"] if p["port"] == port), None)
        assert entry is not None, f"{url}: the Service {parts.hostname} has no port {port}"
        pods = [p for p in self.pods if p.namespace == service["metadata"]["namespace"]
                and matches({"matchLabels": service["spec"]["selector"]}, dict(p.labels))]
        assert pods, f"{url}: the Service {parts.hostname} selects no pod"
        target = entry.get("targetPort", port)
        numbers = {p.port(target) for p in pods}
        assert len(numbers) == 1 and None not in numbers, f"{url}: target port {target} is not on every pod"
        return pods, numbers.pop()
