"""Settings of the native stack (LOADWATCH_STACK_* environment variables)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from loadwatch import assets
from loadwatch.defaults import HOME
from loadwatch.exporter.settings import ExporterSettings


class StackSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LOADWATCH_STACK_", extra="ignore")

    home: Path = Field(HOME, description="where stacks/ notes the run folders whose stacks run")
    prometheus_dir: Path = Field(default_factory=lambda: assets.path("prometheus"))
    rules_dir: Path | None = Field(None, description="default: prometheus/rules")
    prometheus_bin: str = "prometheus"
    alertmanager_bin: str = "prometheus-alertmanager"
    scrape_interval: str = "5s"
    evaluation_interval: str = "5s"
    exporter_interval: float = ExporterSettings.model_fields["interval"].default
    exporter_window: float = ExporterSettings.model_fields["window"].default
    exporter_timeout: float = ExporterSettings.model_fields["timeout"].default
    group_wait: str = "10s"
    group_interval: str = "1m"
    webhook_url: str | None = None
    start_timeout: float = 60.0
    free_ports: bool = Field(False, description="every server on a free port rather than its default: stacks "
                             "started side by side on one machine (parallel CI jobs) never race for a port")

    @property
    def stacks_dir(self) -> Path:
        return self.home / "stacks"
