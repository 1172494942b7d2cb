"""The images' dependencies, without Docker: each lock installs, and the sidecar's venv, made as its
image makes it (the lock with hashes, loadwatch with --no-deps), runs the sidecar and the alert log
and cannot import the load generator's libraries (finding 14 of the cluster review)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import venv

import pytest

from tests.conftest import REPO, closed_port, free_port, get, wait_for

LOCKS = {"sidecar": REPO / "exporters" / "requirements.lock", "locust": REPO / "locustfiles" / "requirements.lock"}


def pinned(lock) -> dict[str, str]:
    return dict(re.findall(r"(?m)^([a-z0-9._-]+)==([^\s;]+)", lock.read_text()))


def test_each_image_installs_from_its_lock_pinned_and_hashed():
    for name, lock in LOCKS.items():
        lines = [line for line in lock.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
        assert pinned(lock) and all("==" in line or "--hash=sha256:" in line for line in lines), name
        dockerfile = (REPO / ("exporters" if name == "sidecar" else "locustfiles") / "Dockerfile").read_text()
        assert "--require-hashes -r requirements.lock" in dockerfile and "--no-deps ." in dockerfile, name
        assert re.search(r"(?m)^FROM python:\d+\.\d+\.\d+-slim-\w+", dockerfile), f"{name}: a floating base tag"
    assert not {"locust", "scipy", "bokeh", "numpy", "matplotlib"} & set(pinned(LOCKS["sidecar"]))
    locust = pinned(LOCKS["locust"])
    assert locust["locust"] == "2.47.0" and "scipy" in locust


@pytest.fixture(scope="module")
def sidecar_venv(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sidecar-venv")
    venv.EnvBuilder(with_pip=True).create(folder)
    python = folder / "bin" / "python"
    for args in (["--require-hashes", "-r", str(LOCKS["sidecar"])], ["--no-deps", str(REPO)]):
        run = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-cache-dir", *args],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
    return folder / "bin"


def test_the_sidecars_venv_runs_the_sidecar_without_the_load_generators_libraries(sidecar_venv):
    for module in ("locust", "scipy", "bokeh"):
        run = subprocess.run([str(sidecar_venv / "python"), "-c", f"import {module}"], capture_output=True, text=True)
        assert run.returncode == 1 and "ModuleNotFoundError" in run.stderr, module
    port = free_port()
    process = subprocess.Popen([str(sidecar_venv / "loadwatch"), "exporter", "--target",
                                f"vllm=http://127.0.0.1:{closed_port()}", "--port", str(port), "--interval", "0.2"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        page = wait_for(lambda: (text := get(f"http://127.0.0.1:{port}/metrics").decode())
                        and 'loadwatch_engine_up{target="vllm"} 0.0' in text and text, 30, "the sidecar serving")
        assert 'loadwatch_engine_scrape_errors_total{reason="connection",target="vllm"}' in page
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and "Traceback" not in output, output


def test_the_sidecars_image_runs_the_alert_log_and_wait_too(sidecar_venv):
    port = free_port()
    log = subprocess.Popen([str(sidecar_venv / "loadwatch"), "alert-log", "--port", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: get(f"http://127.0.0.1:{port}/-/ready") is not None, 30, "the alert log ready")
        waited = subprocess.run([str(sidecar_venv / "loadwatch"), "wait", f"http://127.0.0.1:{port}/-/ready",
                                 "--timeout", "20s"], capture_output=True, text=True, timeout=60)
        assert waited.returncode == 0 and "answers" in waited.stdout, waited.stdout + waited.stderr
    finally:
        log.terminate()
        log.communicate(timeout=30)
    gone = subprocess.run([str(sidecar_venv / "loadwatch"), "wait", f"http://127.0.0.1:{closed_port()}/health",
                           "--timeout", "3s"], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and "did not answer 200 within 3s" in gone.stdout, gone.stdout + gone.stderr


def test_the_full_cli_still_lists_every_command():
    run = subprocess.run([sys.executable, "-m", "loadwatch.cli", "--help"], capture_output=True, text=True, timeout=60)
    for command in ("exporter", "alert-log", "wait", "run", "capacity", "tune", "report", "explain"):
        assert command in run.stdout, command
