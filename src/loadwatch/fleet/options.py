"""How a command asks for a fleet: the options shared by run, capacity, experiment, tune and up (what
a stack records of the servers it runs against is fleet.servers.Servers)."""

from __future__ import annotations

import string
from typing import ClassVar, Self

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from loadwatch.defaults import Part
from loadwatch.durations import Seconds
from loadwatch.fleet.faults import Fault
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
    def embedded(self) -> bool:
        """Replicas started here (--replicas): their router's policy and their count are loadwatch's."""
        return self.replicas is not None

    @property
    def resizable(self) -> bool:
        """Its replica count is loadwatch's to set: the embedded fleet's, or through --scale's command."""
        return self.embedded or self.scale is not None

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

    def parts(self) -> list[str]:
        """The servers an embedded fleet starts here, each on a port of its own (the stack's key for it):
        its replicas, its router and the router's metrics listener."""
        return [*map(Part.replica, self.names()), Part.ROUTER, Part.ROUTER_METRICS] if self.embedded else []

    def given(self) -> dict:
        """The fleet options given, by field (not what a subclass adds): what a command line repeats."""
        return self.model_dump(include=set(FleetOptions.model_fields), exclude_defaults=True)

    def changed(self, fields: dict) -> Self:
        """These options with `fields` changed (an experiment arm's, a tune lever's), checked again."""
        return self.model_validate({**self.model_dump(), **fields})

    def flags_of(self, name: str) -> list[str]:
        return [item.partition("=")[2] for item in self.replica_arg if item.partition("=")[0] == name]


class ServerOptions(FleetOptions):
    """The servers a command (up, run, capacity, tune) runs against, as its options ask: the embedded
    engine, an embedded fleet (--replicas), the user's server (--target), or the user's fleet behind its
    router (--target with --replica, --router or --scale). Its checks are the rules of these options
    together, each written here once. An experiment's fleet options are FleetOptions alone: its arms
    name their servers."""

    target: str | None = None  # the shared --target, as given
    scaling: bool = False  # capacity's --scaling: one replica first, then all
    # run's --scale-at, parsed (fleet.schedule.parse_plan): (seconds into the load, replicas)
    plan: list[tuple[float, int]] = []
    # run's --fault-at, parsed (fleet.faults.parse_faults): (seconds into the load, the fault)
    faults: list[tuple[float, Fault]] = []

    @model_validator(mode="after")
    def _where(self) -> ServerOptions:
        if self.replicas is not None and self.target:
            raise ValueError("--replicas starts a fleet on this machine; against your own, give --target ROUTER "
                             "with --replica NAME=URL (or --router vllm-router, to use the replicas it lists)")
        if (self.replica or self.router_metrics or self.scale) and not self.target:
            raise ValueError("--replica, --router-metrics and --scale are for your own fleet: give --target, its "
                             "router's URL (the embedded fleet, --replicas N, is scaled through its router)")
        if self.router and self.replicas is None and not self.target:
            raise ValueError("--router names the router of a fleet: give --replicas N to start one here, or "
                             "--target ROUTER for your own")
        return self

    @model_validator(mode="after")
    def _scales(self) -> ServerOptions:
        # Two replicas at least to change among: the embedded fleet's, or those --scale sets (with a target).
        scales = (self.replicas or 0) > 1 or self.scale is not None
        how = ("give --replicas N (2 or more) for the embedded fleet, or --target ROUTER with --scale "
               "'COMMAND {replicas}' for your own")
        if self.plan and not scales:
            raise ValueError(f"--scale-at changes a fleet's replicas: {how}")
        if self.replicas and any(count > self.replicas for _, count in self.plan):
            raise ValueError(f"--scale-at asks for more replicas than --replicas {self.replicas} starts")
        if self.scaling and not scales:
            raise ValueError(f"--scaling compares one replica with the fleet: {how}")
        return self

    @model_validator(mode="after")
    def _faulted(self) -> ServerOptions:
        # Only the replicas loadwatch started are its own to kill, stop or fill.
        if not self.faults:
            return self
        if self.target:
            raise ValueError("--fault-at acts on replicas loadwatch started (--replicas N): it kills, stops or fills "
                             "nothing of a server it does not own (--target)")
        if self.replicas is None:
            raise ValueError("--fault-at acts on an embedded fleet's replicas: give --replicas N (2 or more, for the "
                             "router to send elsewhere)")
        unknown = sorted({fault.replica for _, fault in self.faults} - set(self.names()))
        if unknown:
            raise ValueError(f"--fault-at names {', '.join(unknown)}, not one of the replicas "
                             f"({', '.join(self.names())})")
        return self


def is_pattern(name: str) -> bool:
    return bool(PATTERN.search(name))


def replica_name(index: int) -> str:
    return string.ascii_lowercase[index] if index < 26 else f"r{index}"
