"""Where the embedded engine lives and how it is started (LOADWATCH_* environment variables)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from loadwatch.defaults import HOME


class EngineSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LOADWATCH_", extra="ignore", protected_namespaces=())

    home: Path = Field(HOME, description="venv, model and engine state")
    vllm_version: str = "0.32.0"
    torch_version: str = "2.13.0"
    # Where pip finds torch's CPU build when it is not in a local wheel folder (PyTorch's CPU index).
    torch_index_url: str | None = None
    kv_cache_gib: int = Field(1, ge=1, description="VLLM_CPU_KVCACHE_SPACE")
    served_model_name: str = "tiny"
    # Cores kept free of vLLM's spinning OpenMP threads, for the load generator, sidecar and
    # Prometheus: on a small machine they would otherwise be starved and the timings skewed.
    reserved_cpus: int = Field(1, ge=0)

    @property
    def venv(self) -> Path:
        return self.home / "engine-venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def model_dir(self) -> Path:
        return self.home / "tiny-llama"

    @property
    def state_dir(self) -> Path:
        return self.home / "engine"
