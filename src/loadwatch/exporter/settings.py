"""The sidecar's settings: targets from --target NAME=URL and/or a YAML file, timings, port."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, Field, HttpUrl, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from loadwatch.credentials import redact_url
from loadwatch.defaults import LOOPBACK, PORTS


class Target(BaseModel):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    url: HttpUrl

    @property
    def metrics_url(self) -> str:
        return str(self.url).rstrip("/") + "/metrics"

    @property
    def shown_url(self) -> str:
        """The metrics URL as logs show it: without credentials."""
        return redact_url(self.metrics_url)


class ExporterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LOADWATCH_EXPORTER_", extra="ignore")

    targets: list[Target] = []
    # A fleet's routers (URL: where their /metrics are); the replicas they name by URL are the targets.
    routers: list[Target] = []
    # This machine only unless asked (--host 0.0.0.0 in a container or pod).
    host: str = Field(LOOPBACK, description="address to listen on (0.0.0.0 opens it to the network)")
    port: int = Field(PORTS["sidecar"], ge=0, le=65535, description="port to listen on")
    interval: float = Field(1.0, gt=0, description="seconds between the sidecar's own samples")
    window: float = Field(15.0, gt=0, description="seconds of samples behind the _max peaks and windowed ratios")
    # Sampling runs beside scrapes, never in them; 5 s still ends before Prometheus gives up (10 s).
    timeout: float = Field(5.0, gt=0, description="seconds a sample may take")

    @classmethod
    def add_options(cls, parser) -> None:
        """The command line's options, from the fields: one home for their defaults and help."""
        for name in ("host", "port", "interval", "window", "timeout"):
            field = cls.model_fields[name]
            parser.add_argument(f"--{name}", type=type(field.default), default=None,
                                help=f"{field.description}; default {field.default}")

    @model_validator(mode="after")
    def _check(self) -> ExporterSettings:
        if not self.targets and not self.routers:
            # A router alone is a sidecar of its own (a router's pod): its replicas' sidecars are elsewhere.
            raise ValueError("no target: give --target NAME=URL, --targets-file FILE or --router NAME=URL")
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError(f"target names must be unique: {names}")
        routers = [t.name for t in self.routers]
        if len(set(routers)) != len(routers):
            raise ValueError(f"router names must be unique: {routers}")
        if self.window < self.interval:
            raise ValueError("the window must be at least one sampling interval")
        return self


def parse_target(text: str) -> dict:
    name, sep, url = text.partition("=")
    if not sep:
        raise ValueError(f"{text!r}: expected NAME=URL, e.g. vllm-0=http://{LOOPBACK}:8000")
    return {"name": name, "url": url}


def load_targets_file(path: Path) -> list[dict]:
    """`targets: [{name: ..., url: ...}, ...]`; ValueError with the reason otherwise."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("targets"), list):
        raise ValueError(f"{path}: expected a mapping with a `targets` list of {{name, url}}")
    return data["targets"]


def build_settings(targets: list[str], targets_file: Path | None, routers: list[str] | None = None,
                   **options) -> ExporterSettings:
    """Settings from the command line; ValueError naming what is wrong."""
    entries = [parse_target(t) for t in targets]
    if targets_file is not None:
        entries += load_targets_file(targets_file)
    try:
        return ExporterSettings(targets=entries, routers=[parse_target(r) for r in routers or []],
                                **{k: v for k, v in options.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
        raise ValueError(problems) from None
