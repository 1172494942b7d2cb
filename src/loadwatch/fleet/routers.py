"""The routers loadwatch knows, as a registry: a new one is one class (its start in front of embedded
replicas, its policies, where it lists its workers and where its metrics are).

vllm-router (the vLLM project's router, PyPI `vllm-router`) is the first. llm-d's inference scheduler
(EPP) and production-stack's router would come here: both list their endpoints and export Prometheus
metrics, which is all the sidecar and the replica discovery need of a router.
"""

from __future__ import annotations

import json
import subprocess
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import Request

from loadwatch import loopback


class RouterError(Exception):
    """A router that cannot be used as asked; the message says why, in the router's words where it has some."""


class Router(ABC):
    name: ClassVar[str]
    default_policy: ClassVar[str]
    health_path: ClassVar[str] = "/health"  # 200 once it routes

    @abstractmethod
    def command(self, python: Path, port: int, metrics_port: int, workers: list[str], policy: str,
                extra: list[str]) -> list[str]:
        """The router in front of `workers` on 127.0.0.1:`port`, its metrics on `metrics_port`."""

    @abstractmethod
    def check_policy(self, python: Path, policy: str, extra: list[str]) -> None:
        """RouterError, in the router's own words, for a policy or flag it does not take."""

    @abstractmethod
    def workers(self, url: str, timeout: float = 5.0) -> list[str]:
        """The replicas' URLs as the router at `url` lists them; RouterError when it does not answer so."""

    @abstractmethod
    def add_worker(self, url: str, worker: str, timeout: float = 30.0) -> None:
        """The router at `url` sends to `worker` too; RouterError where it refuses."""

    @abstractmethod
    def remove_worker(self, url: str, worker: str, timeout: float = 30.0) -> None:
        """The router at `url` sends no new request to `worker`; RouterError where it refuses."""


class VllmRouter(Router):
    """vllm-router 0.1.x. Its default policy is cache_aware; loadwatch's is round_robin: stateless and
    even, it measures the replicas, not the routing, and it is the baseline tune measures cache_aware
    and power_of_two against (a workload of random prompts gives cache_aware nothing to hold on to)."""

    name = "vllm-router"
    default_policy = "round_robin"

    def command(self, python: Path, port: int, metrics_port: int, workers: list[str], policy: str,
                extra: list[str]) -> list[str]:
        return [str(python), "-m", "vllm_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
                "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port),
                "--worker-urls", *workers, "--policy", policy, *extra]

    def check_policy(self, python: Path, policy: str, extra: list[str]) -> None:
        # Its own parser judges, before any replica is started: argparse stops at the first bad
        # option, and at --help after every good one.
        checked = subprocess.run([str(python), "-m", "vllm_router.launch_router", "--policy", policy, *extra,
                                  "--help"], capture_output=True, text=True, timeout=60)
        if checked.returncode != 0:
            said = [line for line in checked.stderr.splitlines() if "error:" in line]
            raise RouterError(f"vllm-router refused it: {said[-1] if said else checked.stderr.strip()[-300:]}")

    def workers(self, url: str, timeout: float = 5.0) -> list[str]:
        where = url.rstrip("/") + "/list_workers"
        try:
            with loopback.urlopen(where, timeout=timeout) as response:
                listed = json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise RouterError(f"{where} did not list the router's workers ({exc}): name them with "
                              "--replica NAME=URL") from None
        urls = listed.get("urls") if isinstance(listed, dict) else None
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise RouterError(f"{where} answered {str(listed)[:200]!r}, not vllm-router's list of workers")
        return sorted(urls)

    def add_worker(self, url: str, worker: str, timeout: float = 30.0) -> None:
        if worker not in self.workers(url):  # a second add is refused with a 4xx
            self._manage(url, "add_worker", worker, timeout)

    def remove_worker(self, url: str, worker: str, timeout: float = 30.0) -> None:
        if worker in self.workers(url):
            self._manage(url, "remove_worker", worker, timeout)

    @staticmethod
    def _manage(url: str, action: str, worker: str, timeout: float) -> None:
        # vllm-router's worker management: POST /add_worker?url=W, /remove_worker?url=W (it health-checks
        # a worker it adds before it answers).
        where = f"{url.rstrip('/')}/{action}?{urlencode({'url': worker})}"
        try:
            with loopback.urlopen(Request(where, method="POST"), timeout=timeout) as response:
                response.read()
        except HTTPError as exc:
            said = exc.read().decode(errors="replace").strip()[:200]
            raise RouterError(f"vllm-router refused {action} {worker}: HTTP {exc.code} {said}") from None
        except OSError as exc:
            raise RouterError(f"{where} did not answer ({exc})") from None


ROUTERS: dict[str, type[Router]] = {cls.name: cls for cls in (VllmRouter,)}


def router(name: str) -> Router:
    try:
        return ROUTERS[name]()
    except KeyError:
        raise RouterError(f"loadwatch does not know the router {name!r}; it knows {', '.join(sorted(ROUTERS))} "
                          "(docs/guides/fleet.md says what another one needs)") from None
