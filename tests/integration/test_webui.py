"""The real Locust web UI in headless Chromium: start a run from the form, watch the LLM tab fill."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import finish, free_port, get, locust_command, wait_for

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium")


@pytest.mark.needs("chromium")
def test_llm_tab_fills_with_figures_during_a_run_started_from_the_ui(fake_server, tmp_path):
    from playwright.sync_api import sync_playwright

    # Behind a round-robin router of two replicas, as their answers show it: a row per replica too.
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "10", "--fault", "http_500=10",
                         "--fingerprints", "a,b")
    web_port = free_port()
    locust = subprocess.Popen(
        locust_command("-H", server.url, "--web-host", "127.0.0.1", "--web-port", str(web_port),
                       "--metrics-port", "0", "--processes", "2", "--replica", "a", "--replica", "b"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    ui = f"http://127.0.0.1:{web_port}/"
    try:
        wait_for(lambda: get(ui), 30, "the web UI")
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=["--headless", "--no-sandbox", "--disable-background-networking", "--disable-gpu"],
            )
            page = browser.new_page(viewport={"width": 1600, "height": 900})
            page.goto(ui)
            page.fill("input[name=userCount]", "6")
            page.fill("input[name=spawnRate]", "6")
            page.get_by_role("button", name="Start").click()
            page.get_by_role("tab", name="LLM").click()
            row = page.get_by_role("row", name="chat (fake-model)")
            row.wait_for(timeout=20_000)

            def figures() -> list[str] | None:
                cells = [c.inner_text() for c in row.get_by_role("cell").all()]
                return cells if len(cells) == 17 and float(cells[4] or 0) > 0 and int(cells[2]) > 0 else None

            first = wait_for(figures, 20, "the LLM row to show TTFT and failures")
            headers = [h.inner_text().replace("\n", " ") for h in page.get_by_role("columnheader").all()]
            page.wait_for_timeout(4000)
            later = figures()
            # Both replicas' rows from one look at the page: read a cell at a time, the tab may refresh
            # between them and a replica's count jump by a report's worth of requests.
            rows = page.evaluate("() => Array.from(document.querySelectorAll('tr'), "
                                 "r => Array.from(r.querySelectorAll('td'), c => c.innerText))")
            replicas = {cells[0].removeprefix("replica "): cells for cells in rows
                        if cells and cells[0].startswith("replica ")}
            page.screenshot(path=str(tmp_path / "llm-tab.png"))
            browser.close()
    finally:
        finish(locust)

    assert headers[:5] == ["Scenario (model) or replica", "Requests", "Failures", "Rejected", "TTFT p50 (ms)"]
    assert headers[7] == "TPOT p50 (ms)" and headers[16] == "Output tok/s"
    assert first[0] == "chat (fake-model)"
    assert int(later[1]) > int(first[1]), "the tab must keep updating during the run"
    ttft_p50, tpot_p50 = float(later[4]), float(later[7])
    assert 50 <= ttft_p50 < 60 and 10 <= tpot_p50 < 11
    assert float(later[16]) > 0
    # Each replica's row: its requests (about half each, round robin) and its own TTFT, no failures of its own.
    assert sorted(replicas) == ["a", "b"], rows
    for name, cells in replicas.items():
        assert cells[0] == f"replica {name}" and int(cells[1]) > 0 and cells[2] == "", cells
        assert 50 <= float(cells[4]) < 60, cells
    assert abs(int(replicas["a"][1]) - int(replicas["b"][1])) <= max(4, int(replicas["a"][1]) // 5)
