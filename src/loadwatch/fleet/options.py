"""How a command asks for a fleet: the options shared by run, capacity, experiment, tune and up, and
what a stack records of the fleet it runs against."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from loadwatch.durations import Seconds
from loadwatch.fleet.routers import ROUTERS, RouterProgram, VllmRouter, router
from loadwatch.settings import PATTERN


class FleetOptions(BaseModel):
    """`replicas` embedded engines behind `router`, or (with a target) the user's own fleet's replicas."""

    # The options of an embedded fleet alone: an experiment's (its arms name servers of your own).
    EMBEDDED: ClassVar[tuple[str, ...]] = ("replicas", "router", "router_policy", "replica_arg", "router_arg")

    replicas: int | None = Field(None, ge=1, description="start this many embedded vLLM replicas behind the router")
    router: str | None = Field(None, description="the router in front of the replicas: vllm-router (the "
                                                 "default) or smg; given with --target alone, the replicas "
                                                 "are those it lists")
    router_policy: str | None = Field(None, description="the embedded router's policy (vllm-router: round_robin, "
                                                        "power_of_two, cache_aware, consistent_hash, ...; smg: "
                                                        "also prefix_hash); default round_robin")
    replica_arg: list[str] = Field([], description="NAME=FLAG: a vllm serve flag for one embedded replica only "
                                                   "(b=--max-num-seqs=1), repeatable")
    router_arg: list[str] = Field([], description="a flag for the embedded router, repeatable")
    replica: list[str] = Field([], description="NAME=URL: a replica of your own fleet behind --target, "
                                               "repeatable (default: the replicas the router lists); or a "
                                               "pattern of the names the replicas answer with ('vllm-*': "
                                               "Kubernetes pods), their metrics read where the router lists them")
    router_metrics: str | None = Field(None, description="your router's metrics base URL, read by the sidecar "
                                                         "(vllm-router, smg: its --prometheus-port)")
    scale: str | None = Field(None, description="the command that sets your fleet's replica count, with {replicas} "
                                                "in it (kubectl scale deployment/vllm --replicas={replicas}); "
                                                "loadwatch then waits for the router to list that many")
    scale_timeout: Seconds = Field(900.0, gt=0, description="how long --scale's command and the new replicas may "
                                                            "take, e.g. 15m")

    @field_validator("router")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        if name is not None and name not in ROUTERS:
            raise ValueError(f"loadwatch does not know the router {name!r}; it knows {', '.join(sorted(ROUTERS))} "
                             "(docs/guides/fleet.md says what another one needs)")
        return name

    @field_validator("replica_arg", "replica")
    @classmethod
    def _named(cls, items: list[str], info: ValidationInfo) -> list[str]:
        for item in items:
            name, sep, value = item.partition("=")
            if info.field_name == "replica" and is_pattern(name):
                if sep:
                    raise ValueError(f"{item!r}: a pattern (with * ? or [) names the replicas by the names they "
                                     "answer with and takes no URL: the router lists where they are")
            elif not sep or not name or not value:
                raise ValueError(f"{item!r} is not NAME=VALUE" + (" or a pattern of names ('vllm-*')"
                                                                  if info.field_name == "replica" else ""))
        return items

    @field_validator("scale")
    @classmethod
    def _template(cls, command: str | None) -> str | None:
        if command is not None and "{replicas}" not in command:
            raise ValueError(f"--scale {command!r} has no {{replicas}} for the count loadwatch asks for")
        return command

    @model_validator(mode="after")
    def _one_fleet(self) -> FleetOptions:
        if self.replicas is not None and self.replica:
            raise ValueError("--replicas starts a fleet, --replica names one of yours: give one or the other")
        if self.patterns and len(self.patterns) != len(self.replica):
            raise ValueError("--replica takes names with URLs or patterns of names, not both: a pattern's replicas "
                             "are those the router lists")
        unknown = {item.partition("=")[0] for item in self.replica_arg} - set(self.names())
        if unknown:
            raise ValueError(f"--replica-arg names {', '.join(sorted(unknown))}, not one of the replicas "
                             f"({', '.join(self.names()) or 'none: give --replicas N'})")
        return self

    @property
    def wanted(self) -> bool:
        return self.replicas is not None or bool(self.replica) or self.router is not None \
            or self.router_metrics is not None or self.scale is not None  # --scale: a router's fleet

    @property
    def program(self) -> RouterProgram:
        """The registry's router for --router (validated above), vllm-router where none is named: callers
        ask it for its name, policy, command line and workers rather than look a string up again."""
        return router(self.router or VllmRouter.name)

    @property
    def patterns(self) -> tuple[str, ...]:
        """--replica's patterns: the replicas are those the router lists, each named by its answers."""
        return tuple(item for item in self.replica if is_pattern(item))

    def names(self) -> list[str]:
        """The embedded replicas' names: a, b, c, ... (r26, r27, ... past z)."""
        return [replica_name(i) for i in range(self.replicas or 0)]

    def flags_of(self, name: str) -> list[str]:
        return [item.partition("=")[2] for item in self.replica_arg if item.partition("=")[0] == name]


def is_pattern(name: str) -> bool:
    return bool(PATTERN.search(name))


def replica_name(index: int) -> str:
    return string.ascii_lowercase[index] if index < 26 else f"r{index}"


@dataclass
class Fleet:
    """The fleet a stack runs against, as stack.json keeps it."""

    router: str  # its kind, a name of fleet.routers.ROUTERS
    url: str  # where clients send: the router
    replicas: dict[str, str] = field(default_factory=dict)  # name -> base URL
    metrics: str | None = None  # the router's /metrics base URL, where known
    policy: str | None = None  # an embedded router's
    # --replica's patterns: Locust names each request by the name its answer gives (a pod's); `replicas`
    # holds what the router lists, each under the name it answered with (stack._listed).
    patterns: list[str] = field(default_factory=list)
    # What scaling it takes, from the command's FleetOptions (fleet.scale.Scaler.of): --scale's command
    # (None: the embedded fleet's router is told which replicas to use) and its timeout; `named`: its
    # replicas named with --replica NAME=URL, kept as named rather than read anew from the router.
    scale: str | None = None
    scale_timeout: float = FleetOptions.model_fields["scale_timeout"].default
    named: bool = False

    def scaling(self, options: FleetOptions) -> None:
        """Keeps what scaling takes of the options the fleet was started or found with."""
        self.scale, self.scale_timeout = options.scale, options.scale_timeout
        self.named = bool(options.replica) and not options.patterns

    @property
    def program(self) -> RouterProgram:
        """The registry's router that `router` names: stack.json keeps the name, the stack talks to this."""
        return router(self.router)

    def locust_options(self) -> list[str]:
        """Locust's --replica options: each request's record names its replica."""
        if self.patterns:
            return [f"--replica={pattern}" for pattern in self.patterns]
        return [f"--replica={name}={url}" for name, url in self.replicas.items()]
