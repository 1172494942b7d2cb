"""The files that cannot import loadwatch.defaults agree with it."""

import re

import pytest

from loadwatch.defaults import PORTS
from tests.conftest import REPO

# Ports that are not ours: Locust's master-worker port, NVIDIA's DCGM exporter.
OTHERS = {5557, 9400}
FILES = ["prometheus/prometheus.yml", "prometheus/alertmanager.yml", "docker-compose.yml", ".env.example",
         "exporters/Dockerfile", "locustfiles/Dockerfile", *[str(p.relative_to(REPO)) for p in
                                                            (REPO / "deploy" / "kubernetes").glob("*.yaml")]]


@pytest.mark.parametrize("name", FILES)
def test_every_port_in_the_deployment_files_is_a_known_default(name):
    text = (REPO / name).read_text()
    ports = {int(p) for p in re.findall(r"(?<![\d.])([3-9]\d{3})(?![\d.])", text)}
    assert ports <= set(PORTS.values()) | OTHERS, f"{name}: unknown ports {ports - set(PORTS.values()) - OTHERS}"


def test_the_scrape_config_and_the_containers_use_the_default_ports():
    prometheus = (REPO / "prometheus" / "prometheus.yml").read_text()
    assert f"sidecar:{PORTS['sidecar']}" in prometheus and f"locust-master:{PORTS['client_metrics']}" in prometheus
    assert f"EXPOSE {PORTS['sidecar']}" in (REPO / "exporters" / "Dockerfile").read_text()
    assert f"{PORTS['client_metrics']}" in (REPO / "locustfiles" / "Dockerfile").read_text()
