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

# Every server loadwatch starts listens here unless its user names another address: nothing is
# open to the network unless asked.
LOOPBACK = "127.0.0.1"

# The embedded engine's venv, model and state, and the stack's record of what runs (LOADWATCH_HOME
# and LOADWATCH_STACK_HOME move them apart, as tests do).
HOME = Path.home() / ".cache" / "loadwatch"
