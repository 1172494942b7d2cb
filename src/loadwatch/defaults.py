"""Default ports, listen address and home folder of every part of the stack, declared once.

Python code reads them from here; the YAML, compose file, manifests and Dockerfiles that cannot
import Python are checked against them by tests/unit/test_defaults.py.
"""

from __future__ import annotations

from pathlib import Path

PORTS: dict[str, int] = {
    "vllm": 8000,
    "locust_web_ui": 8089,
    "client_metrics": 9646,
    "sidecar": 9647,
    "prometheus": 9090,
    "alertmanager": 9093,
    "grafana": 3000,
    "alert_log": 9095,
}


class Part:
    """Each part of a stack by name: its key in the stack's ports (saved in stack.json, so
    never renamed) and, but for the two ports that are no process of their own, its component's name
    (its log: logs/NAME.log)."""

    CLIENT = "client"  # the load generator's metrics (Locust is no component of the stack)
    EXPORTER = "exporter"  # the sidecar
    PROMETHEUS = "prometheus"
    ALERTMANAGER = "alertmanager"
    ALERT_LOG = "alert-log"
    ROUTER = "router"  # an embedded fleet's router...
    ROUTER_METRICS = "router-metrics"  # ...and its metrics listener (no component of its own)

    @staticmethod
    def replica(name: str) -> str:
        """An embedded fleet's replica `name`."""
        return f"replica-{name}"


# Every server loadwatch starts listens here unless its user names another address: nothing is
# open to the network unless asked.
LOOPBACK = "127.0.0.1"

# The embedded engine's venv, model and state, and the stack's record of what runs (LOADWATCH_HOME
# and LOADWATCH_STACK_HOME move them apart, as tests do).
HOME = Path.home() / ".cache" / "loadwatch"
