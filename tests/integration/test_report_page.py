"""report.html as a person opens it: a run against the fake server, `loadwatch report` on its folder,
and headless Chromium with the network off finds every chart drawn with the run's data."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import locust_command
from tests.pages import open_offline

pytestmark = pytest.mark.browser


@pytest.mark.needs("chromium")
def test_the_report_page_opens_offline_with_every_chart_drawn(fake_server, tmp_path):
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "10", "--fault", "http_500=10")
    results = tmp_path / "results.json"
    subprocess.run(locust_command("-H", server.url, "--headless", "-u", "4", "-r", "4", "-t", "6s", "--metrics-port",
                                  "0", "--results-json", str(results)), capture_output=True, timeout=120)
    report = subprocess.run([sys.executable, "-m", "loadwatch.cli", "report", str(tmp_path)], capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    drawn = open_offline(tmp_path / "report.html", tmp_path / "report.png")
    assert not drawn["errors"], drawn["errors"]
    assert drawn["points"] == json.loads(results.read_text())["completed"]
    assert any(t.startswith("Client TTFT") for t in drawn["titles"]) and "Failures/s by reason" in drawn["titles"]
    assert drawn["seen"] == {"Settings": True, "The engine's side is missing": True}
