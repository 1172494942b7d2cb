"""The routers' registry: smg, the second router, is one class beside vllm-router (its start, its list
of workers); starting it for real is tests/integration/test_fleet_smg.py."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from loadwatch.fleet import routers
from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.routers import ROUTERS, RouterError, Smg, router

PYTHON = Path("/venv/bin/python")


def test_smg_is_chosen_by_its_name_with_its_own_wheel():
    assert sorted(ROUTERS) == ["smg", "vllm-router"]
    assert isinstance(router("smg"), Smg) and isinstance(FleetOptions(replicas=2, router="smg").program, Smg)
    # Each pins its own wheel, named as the router is (tests/unit/deploy/test_router_agrees.py: its images).
    assert all(kind.requirement == f"{name}=={kind.version}" for name, kind in ROUTERS.items())
    with pytest.raises(RouterError, match="it knows smg, vllm-router"):
        router("envoy")


def test_smgs_command_line_puts_it_and_its_metrics_on_loopback_in_front_of_the_workers():
    command = Smg().command(PYTHON, 8000, 29000, ["http://127.0.0.1:8001", "http://127.0.0.1:8002"], "prefix_hash",
                            ["--health-check-interval-secs=5"])
    assert command == ["/venv/bin/python", "-m", "smg", "launch", "--host", "127.0.0.1", "--port", "8000",
                       "--worker-urls", "http://127.0.0.1:8001", "http://127.0.0.1:8002", "--policy", "prefix_hash",
                       "--prometheus-host", "127.0.0.1", "--prometheus-port", "29000",
                       "--health-check-interval-secs=5"]
    assert Smg.health_path == "/readiness" and Smg.default_policy == "round_robin"


def listing(*workers: tuple[str, str]) -> bytes:
    """smg 1.13.0's GET /workers, as it answers (its fields that loadwatch reads, and a few others)."""
    return json.dumps({"workers": [{"id": f"01a21e80-{i}", "url": url, "status": status,
                                    "is_healthy": status == "ready", "worker_type": "regular"}
                                   for i, (url, status) in enumerate(workers)],
                       "total": len(workers)}).encode()


def test_smg_lists_the_workers_it_sends_to_or_may_again_but_not_one_it_drains(monkeypatch):
    answer = listing(("http://127.0.0.1:8002", "ready"), ("http://127.0.0.1:8001", "not_ready"),
                     ("http://127.0.0.1:8003", "draining"))
    monkeypatch.setattr(routers.loopback, "urlopen", lambda url, timeout: io.BytesIO(answer))
    assert Smg().workers("http://127.0.0.1:8000") == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]


def test_an_answer_that_is_not_smgs_list_is_refused(monkeypatch):
    monkeypatch.setattr(routers.loopback, "urlopen", lambda url, timeout: io.BytesIO(b'{"urls": []}'))
    with pytest.raises(RouterError, match="not smg's list of workers"):
        Smg().workers("http://127.0.0.1:8000")
