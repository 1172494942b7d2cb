"""A server configuration tune tries: vLLM's flags, the environment variables some levers are
(vLLM on the CPU takes its KV cache's size from VLLM_CPU_KVCACHE_SPACE, not from a flag), and a
fleet's own settings (its router's policy, its number of replicas), which loadwatch's fleet options
set, not vLLM's."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from loadwatch.metrics.tune import FlagChange

FLEET_FLAGS = {"--router-policy": "router_policy", "--replicas": "replicas", "--router": "router"}  # -> FleetOptions


@dataclass(frozen=True)
class Change:
    flag: str  # a vLLM flag (--max-num-seqs), an environment variable (VLLM_CPU_KVCACHE_SPACE) or a fleet's
    before: str | None  # None: vLLM's default, not set
    after: str

    @property
    def is_env(self) -> bool:
        return not self.flag.startswith("--")

    @property
    def is_fleet(self) -> bool:
        return self.flag in FLEET_FLAGS

    def record(self) -> FlagChange:
        """As tune.json's steps carry it."""
        return FlagChange(flag=self.flag, before=self.before, after=self.after)

    def words(self) -> str:
        return f"{self.flag} {self.before or 'default'} -> {self.after}"


@dataclass(frozen=True)
class Config:
    vllm_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    fleet: tuple[tuple[str, str], ...] = ()  # a fleet's settings a lever changed: FLEET_FLAGS' fields

    def fleet_options(self) -> dict[str, str]:
        """The fleet settings this configuration sets, as FleetOptions' fields."""
        return {FLEET_FLAGS[flag]: value for flag, value in self.fleet}

    def value(self, flag: str) -> str | None:
        """The flag's value as the arguments set it last: "true" for a switch given alone, "false"
        for its --no- form; an environment lever's value; None where it is not set."""
        if not flag.startswith("--"):
            return dict(self.env).get(flag)
        if flag in FLEET_FLAGS:
            return dict(self.fleet).get(flag)
        found = None
        args = list(self.vllm_args)
        for i, arg in enumerate(args):
            if arg == flag:
                found = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else "true"
            elif arg.startswith(flag + "="):
                found = arg.split("=", 1)[1]
            elif arg == "--no-" + flag[2:]:
                found = "false"
        return found

    def with_change(self, change: Change) -> Config:
        if change.is_env:
            return Config(self.vllm_args, tuple(sorted({**dict(self.env), change.flag: change.after}.items())),
                          self.fleet)
        if change.is_fleet:
            fleet = {**dict(self.fleet), change.flag: change.after}
            return Config(self.vllm_args, self.env, tuple(sorted(fleet.items())))
        kept: list[str] = []
        args = list(self.vllm_args)
        skip = False
        for i, arg in enumerate(args):
            if skip:
                skip = False
                continue
            if arg in (change.flag, "--no-" + change.flag[2:]):
                skip = arg == change.flag and i + 1 < len(args) and not args[i + 1].startswith("--")
                continue
            if arg.startswith(change.flag + "="):
                continue
            kept.append(arg)
        added = [change.flag] if change.after == "true" else [f"{change.flag}={change.after}"]
        return Config((*kept, *added), self.env, self.fleet)

    def as_dict(self) -> dict:
        return {"vllm_args": list(self.vllm_args), "env": dict(self.env)} | (
            {"fleet": dict(self.fleet)} if self.fleet else {})

    def command_line(self, model: str) -> str:
        env = " ".join(f"{name}={shlex.quote(value)}" for name, value in self.env)
        return " ".join(part for part in (env, "vllm serve", shlex.quote(model), shlex.join(self.vllm_args)) if part)
