import subprocess
import sys

from tests.conftest import free_port, get, scrape, total, wait_for
from tests.integration.exporter.test_sampler import serve  # noqa: F401  (fixture)


def exporter(*args: str) -> list[str]:
    return [sys.executable, "-m", "loadwatch.cli", "exporter", *args]


def test_exporter_serves_targets_from_flags_and_file(serve, tmp_path):  # noqa: F811
    targets = tmp_path / "targets.yaml"
    targets.write_text(f"targets:\n  - name: from-file\n    url: {serve()}\n")
    port = free_port()
    process = subprocess.Popen(
        exporter("--target", f"from-flag={serve()}", "--targets-file", str(targets), "--port", str(port),
                 "--host", "127.0.0.1", "--interval", "0.2"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        samples = wait_for(lambda: (s := scrape(url)) and total(s, "loadwatch_engine_up") == 2 and s, 15,
                           "both targets up")
        served = {(name, dict(labels)["target"]) for name, labels in samples if "target" in dict(labels)}
        assert ("loadwatch_engine_requests_running", "from-file") in served
        assert ("loadwatch_engine_kv_cache_usage_ratio_max", "from-flag") in served
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert "Traceback" not in output


def test_url_credentials_are_sent_as_basic_auth_and_shown_nowhere(serve):  # noqa: F811
    import base64

    secret = "pw-sentinel-exporter"
    url = serve(authorization="Basic " + base64.b64encode(f"proxy:{secret}".encode()).decode())
    port = free_port()
    process = subprocess.Popen(
        exporter("--target", f"vllm={url.replace('http://', f'http://proxy:{secret}@')}", "--port", str(port),
                 "--interval", "0.2"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        page = wait_for(lambda: (text := get(f"http://127.0.0.1:{port}/metrics").decode())
                        and "loadwatch_engine_up{target=\"vllm\"} 1.0" in text and text, 15, "the target up")
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert secret not in page + output
    assert f"{url.replace('http://', 'http://***@')}/metrics" in output  # the log names it, redacted


def test_bad_targets_are_refused_with_a_message(tmp_path):
    bad = subprocess.run(exporter("--target", "no-equals-sign"), capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "expected NAME=URL" in bad.stdout and "Traceback" not in bad.stderr
    none = subprocess.run(exporter(), capture_output=True, text=True, timeout=30)
    assert none.returncode == 2 and "no target" in none.stdout
    broken = tmp_path / "t.yaml"
    broken.write_text("targets: [ {name: a, url: ")
    bad_file = subprocess.run(exporter("--targets-file", str(broken)), capture_output=True, text=True, timeout=30)
    assert bad_file.returncode == 2 and "not valid YAML" in bad_file.stdout


def test_the_example_targets_file_is_valid():
    from loadwatch.exporter.settings import build_settings
    from tests.conftest import REPO

    settings = build_settings([], REPO / "exporters" / "targets.example.yaml")
    assert [t.name for t in settings.targets] == ["vllm-0", "vllm-1"]
    assert settings.targets[0].metrics_url == "http://127.0.0.1:8000/metrics"


def _serves_without_host(serve, argv: list[str]) -> None:  # noqa: F811
    """Run the sidecar with no --host, as README and the container do; the port comes from the
    environment so that the command line stays exactly as shipped."""
    import os

    port = free_port()
    env = {**os.environ, "LOADWATCH_EXPORTER_PORT": str(port)}
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        wait_for(lambda: process.poll() is None and (s := scrape(f"http://127.0.0.1:{port}/metrics"))
                 and total(s, "loadwatch_engine_up") == 1, 15, "the sidecar up with its target")
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=10)
    assert "Traceback" not in output and process.returncode in (0, -15), output


def test_the_docs_exporter_command_works_as_written(serve):  # noqa: F811
    import re

    from tests.conftest import REPO

    line = next(ln for ln in (REPO / "docs" / "guides" / "monitoring.md").read_text().splitlines()
                if ln.startswith(".venv/bin/loadwatch exporter --target"))
    written = re.sub(r"\[.*?\]", "", line).split()
    assert "--host" not in written
    target = serve()
    argv = [a.replace("http://127.0.0.1:8000", target) for a in written[1:]]
    _serves_without_host(serve, [sys.executable, "-m", "loadwatch.cli", *argv])


def test_container_command_works_as_shipped(serve, tmp_path):  # noqa: F811
    import json

    from tests.conftest import REPO

    dockerfile = (REPO / "exporters" / "Dockerfile").read_text()
    entrypoint = json.loads(next(ln for ln in dockerfile.splitlines() if ln.startswith("ENTRYPOINT"))[10:])
    cmd = json.loads(next(ln for ln in dockerfile.splitlines() if ln.startswith("CMD"))[3:])
    assert entrypoint == ["loadwatch", "exporter"]
    assert "ENV LOADWATCH_EXPORTER_HOST=0.0.0.0" in dockerfile  # else unreachable from outside the container
    targets = tmp_path / "targets.yaml"
    targets.write_text(f"targets:\n  - name: vllm-0\n    url: {serve()}\n")
    argv = [str(targets) if a == "/etc/loadwatch/targets.yaml" else a for a in cmd]
    _serves_without_host(serve, [sys.executable, "-m", "loadwatch.cli", "exporter", *argv])
