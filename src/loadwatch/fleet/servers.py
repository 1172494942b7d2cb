"""The servers under test, as a stack keeps them (stack.json): one or more named replicas, the
router in front of them where there is one, who owns them and how they scale. A single engine is a
set of one, named `vllm` as the sidecar names it; a fleet is replicas behind a router. What reads
the servers (the sidecar's targets, Prometheus' scrapes, the prefix caches to empty, the engine to
stop) asks this object rather than whether it is a fleet."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.routers import RouterProgram, router

ENGINE = "vllm"  # a single engine's replica: the sidecar's target name for it
HERE: Literal["here"] = "here"  # started by loadwatch on this machine, and stopped by it
USER: Literal["user"] = "user"  # the user's own, behind --target: loadwatch starts and stops none of it


class FrontRouter(BaseModel):
    """The router in front of a fleet's replicas, as saved (named apart from catalogue.Router, the
    metric names, and fleet.routers.RouterProgram, the program's own facts)."""

    program: str  # its kind, a name of fleet.routers.ROUTERS
    metrics: str | None = None  # its /metrics base URL, where known
    policy: str | None = None  # an embedded router's


class Resizing(BaseModel):
    """How a fleet is resized, from the command's FleetOptions (fleet.scale.Scaler.of); named apart from
    metrics.capacity.Scaling, a capacity search's result against replicas."""

    command: str | None = None  # --scale's; None: the embedded fleet's router is told which replicas to use
    timeout: float = FleetOptions.model_fields["scale_timeout"].default
    # Replicas named with --replica NAME=URL: kept as named rather than read anew from the router.
    named: bool = False
    # --replica's patterns: Locust names each request by the name its answer gives (a pod's); `replicas`
    # holds what the router lists, each under the name it answered with (stack._listed).
    patterns: list[str] = []

    @classmethod
    def of(cls, options: FleetOptions) -> Resizing:
        return cls(command=options.scale, timeout=options.scale_timeout,
                   named=bool(options.replica) and not options.patterns, patterns=list(options.patterns))


class Servers(BaseModel):
    """The servers a stack runs against."""

    owner: Literal["here", "user"]
    url: str = ""  # where requests go (the router, or the one engine), without credentials; "" until started
    replicas: dict[str, str] = {}  # name -> base URL
    router: FrontRouter | None = None
    scaling: Resizing = Field(default_factory=Resizing)
    # Whether this stack started the embedded engine of engine.json (its home's one engine), which is then
    # its own to stop; set before that engine starts, so that an interrupted start stops it too. A fleet's
    # replicas are among the stack's components instead.
    home_engine: bool = False
    # Where the load's requests go: the user's --target as given, with its credentials, which `url` keeps
    # none of; else `url`. In memory only (stack.up sets it), as stack.json, logs and configs keep no
    # credentials: a stack read from its state file sends no requests.
    request_url: str = Field("", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _of_before(cls, data: Any) -> Any:
        """A state file of before this object: `target`, `engine_started`, `own_engine` (None: of before
        fleets, whose embedded engine was always its own) and `fleet`, side by side."""
        if not isinstance(data, dict) or "owner" in data:
            return data
        fleet, target, started = data.get("fleet"), data.get("target") or "", bool(data.get("engine_started"))
        own = data.get("own_engine")
        servers: dict[str, Any] = {"owner": HERE if started else USER,
                                   "home_engine": started if own is None else bool(own)}
        if fleet:
            servers |= {"url": fleet["url"], "replicas": fleet.get("replicas", {}),
                        "router": {"program": fleet["router"], "metrics": fleet.get("metrics"),
                                   "policy": fleet.get("policy")},
                        "scaling": {"command": fleet.get("scale"), "named": fleet.get("named", False),
                                    "patterns": fleet.get("patterns", []),
                                    **({"timeout": fleet["scale_timeout"]} if "scale_timeout" in fleet else {})}}
        else:
            servers |= {"url": target, "replicas": {ENGINE: target} if target else {}}
        return servers

    @classmethod
    def engine(cls, url: str, owner: Literal["here", "user"], home_engine: bool = False) -> Servers:
        """A single engine: a set of one."""
        return cls(owner=owner, url=url, replicas={ENGINE: url}, home_engine=home_engine)

    @property
    def fleet(self) -> bool:
        """Replicas behind a router: each request's record names the replica that served it."""
        return self.router is not None

    @property
    def program(self) -> RouterProgram:
        """The registry's router that `router` names: stack.json keeps the name, the stack talks to this."""
        assert self.router is not None
        return router(self.router.program)

    def exporter_options(self) -> list[str]:
        """The sidecar's options: each replica a target, and the router where its metrics are known."""
        routers = [f"--router={self.router.program}={self.router.metrics}"] \
            if self.router is not None and self.router.metrics else []
        return [*(f"--target={name}={url}" for name, url in self.replicas.items()), *routers]

    def locust_options(self) -> list[str]:
        """Locust's --replica options, for a fleet: each request's record names its replica."""
        if not self.fleet:
            return []
        if self.scaling.patterns:
            return [f"--replica={pattern}" for pattern in self.scaling.patterns]
        return [f"--replica={name}={url}" for name, url in self.replicas.items()]
