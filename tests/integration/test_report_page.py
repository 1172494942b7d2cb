"""report.html as a person opens it: a run against the fake server, `loadwatch report` on its folder,
and headless Chromium with the network off finds every chart drawn with the run's data."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.conftest import locust_command

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium")


@pytest.mark.needs("chromium")
def test_the_report_page_opens_offline_with_every_chart_drawn(fake_server, tmp_path):
    from playwright.sync_api import sync_playwright

    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "10", "--fault", "http_500=10")
    results = tmp_path / "results.json"
    subprocess.run(locust_command("-H", server.url, "--headless", "-u", "4", "-r", "4", "-t", "6s", "--metrics-port",
                                  "0", "--results-json", str(results)), capture_output=True, timeout=120)
    report = subprocess.run([sys.executable, "-m", "loadwatch.cli", "report", str(tmp_path)], capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    completed = json.loads(results.read_text())["completed"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        context = browser.new_context(offline=True, viewport={"width": 1200, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((tmp_path / "report.html").as_uri())
        page.wait_for_function("() => window.Bokeh && Object.keys(Bokeh.index).length > 0", timeout=30_000)
        drawn = page.evaluate("""() => {
            const doc = Bokeh.documents[0];
            const titles = [...doc.all_models].filter((m) => m.type === "Title").map((m) => m.text);
            const scatter = doc.get_model_by_name("request");
            return {titles, points: scatter ? scatter.data_source.data.id.length : 0};
        }""")
        # Bokeh draws in shadow roots, which Playwright's text locators enter.
        missing = page.get_by_text("The engine's side is missing: this run has no Prometheus data").is_visible()
        summary = page.get_by_text("Settings", exact=True).is_visible()
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert not errors, errors
    assert drawn["points"] == completed
    assert any(t.startswith("Client TTFT") for t in drawn["titles"]) and "Failures/s by reason" in drawn["titles"]
    assert missing and summary
