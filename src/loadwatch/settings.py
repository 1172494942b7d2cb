"""The load generator's settings: one validated object built from Locust's parsed options.

Locust's own parser reads the command line, LOCUST_* environment variables and locust.conf;
this object validates what it found and is the only place the rest of the code reads from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from loadwatch.metrics.slo import SLO, parse_slo


class LoadSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LOADWATCH_", extra="ignore", protected_namespaces=())

    model: str = ""
    endpoint: Literal["chat", "completions"] = "chat"
    max_tokens: int = Field(128, gt=0)
    temperature: float | None = Field(None, ge=0)
    ignore_eos: bool = False
    api_key: SecretStr | None = None
    request_timeout: float = Field(600.0, gt=0)
    metrics_port: int = Field(9646, ge=0, le=65535)
    results_json: Path | None = None
    slo: list[SLO] = []
    request_rate: float | None = Field(None, gt=0)
    burstiness: float = Field(1.0, gt=0)
    max_concurrency: int | None = Field(None, gt=0)
    num_requests: int | None = Field(None, gt=0)
    warmup_requests: int = Field(0, ge=0)
    warmup_seconds: float = Field(0.0, ge=0)
    shape: Literal["step", "ramp", "spike", "sweep"] | None = None
    stage_duration: float = Field(60.0, gt=0)
    step_size: float | None = Field(None, gt=0)
    spike_base: float | None = Field(None, gt=0)
    sweep: list[float] = []
    dataset: Literal["builtin", "sharegpt", "random", "prefix-repetition", "agent", "jsonl"] = "builtin"
    dataset_path: Path | None = None
    seed: int = 0
    dataset_size: int = Field(1000, gt=0)
    sharegpt_output_len: int | None = Field(None, gt=0)
    input_len: int = Field(1024, gt=0)
    output_len: int | None = Field(None, gt=0)
    range_ratio: float = Field(0.0, ge=0, lt=1)
    prefix_len: int = Field(0, ge=0)
    num_prefixes: int = Field(10, gt=0)
    suffix_len: int = Field(256, gt=0)
    agent_prefix: Literal["static", "dynamic"] = "static"

    @field_validator("slo", mode="before")
    @classmethod
    def _parse_slos(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.split(",")
        return [parse_slo(v.strip()) if isinstance(v, str) else v for v in value or [] if v != ""]

    @field_validator("sweep", mode="before")
    @classmethod
    def _parse_sweep(cls, value: object) -> object:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    @classmethod
    def from_options(cls, options: object) -> LoadSettings:
        # The web UI hands back an empty field as "": that means not given.
        given = {name: getattr(options, name, None) for name in cls.model_fields}
        return cls(**{name: value for name, value in given.items() if value not in (None, "")})

    def public_options(self) -> dict:
        """The options of a run as they may be written down: never the API key."""
        options = self.model_dump(mode="json", exclude={"api_key", "slo"})
        options["slo"] = [f"{s.name}={s.limit:g}" for s in self.slo]
        return options
