"""Test hosts on one machine: a network namespace each, joined by a bridge in a namespace of its own,
on 198.18.0.0/24 (RFC 2544's range for benchmarks, found on no real network). Nothing is added to
the machine's own namespace, so no address of these hosts can be reached from it, nor theirs from
outside. Each process runs with a hostname of its own (`unshare --uts`): Locust names a worker by
its hostname, and `ip netns exec` alone would share the machine's.

`cut(name)` takes a host's link down, as a pulled cable; `mend(name)` brings it back. Everything the
harness made is removed on exit, a failed test's too: its processes, then the namespaces (their
links go with them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

SUBNET = "198.18.0"


class HostsUnavailable(Exception):
    """This machine cannot make test hosts (not root, no network namespaces): the reason."""


def _ip(*args: str) -> None:
    run = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if run.returncode != 0:
        raise HostsUnavailable(f"`ip {' '.join(args)}` failed: {run.stderr.strip()}")


class Hosts:
    def __init__(self, *names: str) -> None:
        self.tag = f"lw{uuid.uuid4().hex[:6]}"
        self.names = list(names)
        self.processes: list[subprocess.Popen] = []
        self.made: list[str] = []

    def namespace(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def address(self, name: str) -> str:
        return f"{SUBNET}.{self.names.index(name) + 2}"

    def __enter__(self) -> Hosts:
        if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("unshare"):
            raise HostsUnavailable("test hosts need root, iproute2's `ip` and util-linux's `unshare`")
        bridge = self.namespace("bridge")
        try:
            self._add(bridge)
            _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
            _ip("-n", bridge, "link", "set", "br0", "up")
            for i, name in enumerate(self.names):
                ns = self._add(self.namespace(name))
                # Both ends made inside the namespaces: the machine's own never holds either.
                _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{i}", "netns", bridge)
                _ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", bridge, "link", "set", f"p{i}", "master", "br0")
                _ip("-n", bridge, "link", "set", f"p{i}", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _add(self, ns: str) -> str:
        _ip("netns", "add", ns)
        self.made.append(ns)
        return ns

    def command(self, name: str, argv: list[str]) -> list[str]:
        """`argv` on host `name`, under its own hostname."""
        return ["ip", "netns", "exec", self.namespace(name), "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', name, *argv]

    def popen(self, name: str, argv: list[str], log: Path, **kwargs) -> subprocess.Popen:
        out = log.open("w")
        process = subprocess.Popen(self.command(name, argv), stdout=out, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True, **kwargs)
        out.close()
        self.processes.append(process)
        return process

    def cut(self, name: str) -> None:
        _ip("-n", self.namespace("bridge"), "link", "set", f"p{self.names.index(name)}", "down")

    def mend(self, name: str) -> None:
        _ip("-n", self.namespace("bridge"), "link", "set", f"p{self.names.index(name)}", "up")

    def __exit__(self, *_exc) -> None:
        for process in self.processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, 9)
                except ProcessLookupError:
                    pass
                process.wait(30)
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.made.clear()
