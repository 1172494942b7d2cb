"""The built wheel, installed outside the checkout, runs the commands of README.

The wheel's own loadwatch is installed into a fresh venv in a temporary folder; its dependencies
come from the test venv through a .pth line (installing them again would cost a minute of
downloads and test nothing of ours). Every command runs with that folder as its working
directory, so nothing can be found through the checkout.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port, scrape, total, wait_for
from tests.integration.exporter.test_sampler import serve  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ of a fresh venv holding the wheel built from this checkout."""
    root = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "-w", str(root / "dist"), str(REPO)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=False)
    purelib = next(env_dir.glob("lib/python*/site-packages"))
    (purelib / "test-venv-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    wheel = next((root / "dist").glob("loadwatch-*.whl"))
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(purelib),
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    # pip --target writes no scripts: the console script is the entry point, as a wheel install makes it.
    script = env_dir / "bin" / "loadwatch"
    script.write_text(f"#!{env_dir}/bin/python\nimport sys\nfrom loadwatch.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return env_dir / "bin"


def run(bin_dir: Path, cwd: Path, *argv: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env
    return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=environment)


def test_the_installed_package_is_the_wheels_not_the_checkouts(installed, tmp_path):
    where = run(installed, tmp_path, "python", "-c", "import loadwatch; print(loadwatch.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.parent) and str(REPO) not in where.stdout


def test_locust_runs_the_shipped_locustfile(installed, tmp_path, fake_server):
    server = fake_server("--tokens", "4")
    path = run(installed, tmp_path, "loadwatch", "locustfile")
    assert path.returncode == 0 and Path(path.stdout.strip()).is_relative_to(installed.parent), path
    results = tmp_path / "results.json"
    locust = run(installed, tmp_path, "python", "-m", "locust", "-f", path.stdout.strip(), "--headless",
                 "-H", server.url, "-u", "2", "-r", "2", "-t", "3s", "--stop-timeout", "10", "--metrics-port", "0",
                 "--results-json", str(results))
    assert locust.returncode == 0, locust.stderr[-2000:]
    assert json.loads(results.read_text())["completed"] == server.stats()["arrivals"] > 0


def test_the_installed_exporter_serves_its_target(installed, tmp_path, serve):  # noqa: F811
    port = free_port()
    process = subprocess.Popen([str(installed / "loadwatch"), "exporter", "--target", f"vllm-0={serve()}"],
                               cwd=tmp_path, env={**os.environ, "LOADWATCH_EXPORTER_PORT": str(port)},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: process.poll() is None and total(scrape(f"http://127.0.0.1:{port}/metrics"),
                                                          "loadwatch_engine_up") == 1, 15, "the sidecar up")
    finally:
        process.terminate()
        process.communicate(timeout=10)


def test_the_installed_run_brings_the_stack_up_reports_and_brings_it_down(installed, tmp_path, fake_server):
    server = fake_server("--tokens", "4")
    home = tmp_path / "home"
    done = run(installed, tmp_path, "loadwatch", "run", "--target", server.url, "-u", "2", "-t", "4s",
               "--metrics-port", "0", timeout=240, LOADWATCH_STACK_HOME=str(home))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = next((tmp_path / "runs").iterdir())
    assert json.loads((run_dir / "results.json").read_text())["completed"] > 0
    assert (run_dir / "report.md").is_file(), done.stdout[-3000:]
    assert "stack stopped" in done.stdout
    assert not list((home / "stacks").glob("*.json")), "no stack is noted as running"


@pytest.mark.parametrize("name", ["prefix-caching", "chunked-prefill"])
def test_the_shipped_experiments_travel_in_the_wheel(installed, tmp_path, name):
    checked = run(installed, tmp_path, "loadwatch", "experiment", name, "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"experiment {name}: 2 arms" in checked.stdout


def test_the_web_uis_charts_travel_in_the_wheel(installed, tmp_path):
    found = run(installed, tmp_path, "python", "-c", "from loadwatch.loadgen.webui.tab import STATIC; "
                "print(all((STATIC / name).is_file() for name in ('cockpit.js', 'echarts.min.js')))")
    assert found.stdout.strip() == "True", found.stderr
