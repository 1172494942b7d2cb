"""The LLM tab's charts in headless Chromium: client series beside the engine's (a fake vLLM
/metrics whose KV cache fills, on two data-parallel ranks, each charted), stage marks, an engine that
goes down shown as down, the history back after a reload, dark mode, the slowest recent requests with
their cause, and the run's files on the DOWNLOAD DATA tab."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.conftest import finish, free_port, get, locust_command, wait_for
from tests.fakes.engine import FakeEngine

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium")


def series(page, chart: str) -> dict[str, list]:
    """A chart's series as drawn: name -> [[ms, value], ...]."""
    return page.evaluate(
        """(chart) => Object.fromEntries(echarts.getInstanceByDom(document.querySelector(`[data-chart=${chart}]`))
             .getOption().series.map((s) => [s.name, s.data]))""", chart)


def marks(page, chart: str) -> list[str]:
    return page.evaluate(
        """(chart) => echarts.getInstanceByDom(document.querySelector(`[data-chart=${chart}]`))
             .getOption().series[0].markLine.data.map((m) => m.label.formatter)""", chart)


def llm_tab(playwright, ui: str):
    """Headless Chromium on the LLM tab of the web UI at `ui`, once its charts are drawn: (browser, page)."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
    page = browser.new_page(viewport={"width": 1600, "height": 1400})
    page.goto(ui + "?tab=llm")
    page.wait_for_selector("[data-chart=ttft]", timeout=30_000)
    return browser, page


def known(values: list) -> list[float]:
    return [v for _, v in values if v is not None]


@pytest.mark.needs("chromium")
def test_the_llm_tab_charts_client_latency_beside_the_engine(fake_server, tmp_path):
    from playwright.sync_api import sync_playwright

    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "10", "--fault", "http_500=10")
    engine = FakeEngine(fill_seconds=8, ranks=2)
    web_port = free_port()
    results = tmp_path / "results.json"
    locust = subprocess.Popen(
        locust_command("-H", server.url, "--web-host", "127.0.0.1", "--web-port", str(web_port), "--metrics-port", "0",
                       "--autostart", "-u", "4", "-r", "4", "-t", "14s", "--warmup-seconds", "2",
                       "--engine-metrics", engine.url, "--results-json", str(results)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    ui = f"http://127.0.0.1:{web_port}/"
    try:
        wait_for(lambda: get(ui), 30, "the web UI")
        with sync_playwright() as p:
            browser, page = llm_tab(p, ui)
            wait_for(lambda: len(known(series(page, "kv")["usage"])) >= 8, 30, "eight engine readings")
            ttft = series(page, "ttft")
            kv = known(series(page, "kv")["usage"])
            stage_marks = marks(page, "ttft")
            failures = series(page, "failures")
            rejections = series(page, "rejections")
            ranks, rank_kv = series(page, "ranks"), series(page, "rank_kv")
            wait_for(lambda: page.locator("#loadwatch-slowest-table tr").count() > 3, 15, "the slowest listed")
            slow_rows = page.locator("#loadwatch-slowest-table tr").all_inner_texts()
            page.screenshot(path=str(tmp_path / "llm-tab.png"), full_page=True)

            engine.down = True
            wait_for(lambda: "DOWN" in page.inner_text("#loadwatch-engine-status"), 15, "the engine shown down")
            wait_for(lambda: series(page, "kv")["usage"][-1][1] is None, 10, "a down engine charted as a gap")
            down_bands = page.evaluate(
                """() => echarts.getInstanceByDom(document.querySelector('[data-chart=kv]'))
                     .getOption().series[0].markArea.data.length""")

            before_reload = page.evaluate("() => window.loadwatchCockpit.points.length")
            page.evaluate("() => { localStorage.theme = 'dark'; }")
            page.reload()
            page.wait_for_selector("[data-chart=ttft]", timeout=20_000)
            wait_for(lambda: page.evaluate("() => window.loadwatchCockpit.points.length") >= before_reload, 10,
                     "the history back after a reload")
            dark = page.evaluate("() => window.loadwatchCockpit.dark")

            wait_for(results.exists, 40, "the run to end and write its results")
            page.get_by_role("tab", name="Download Data").click()
            page.get_by_role("link", name="Results JSON (loadwatch)").wait_for(timeout=10_000)
            links = [a.inner_text() for a in page.get_by_role("link").all()]
            download = get(ui + "loadwatch/download/results")
            wait_for(lambda: (tmp_path / "report.html").exists(), 60, "the run's report.html")
            page_download = get(ui + "loadwatch/download/report").decode()
            browser.close()
    finally:
        finish(locust)
        engine.close()

    assert len(known(ttft["client p99"])) >= 5 and min(known(ttft["client p50"])) >= 50
    assert known(ttft["engine mean"]), "the engine's own TTFT beside the client's"
    assert kv[-1] > kv[0] + 0.3, f"the KV cache fills in the chart: {kv}"
    # Two data-parallel ranks, each on its own lines: rank 0 queues while rank 1 has room.
    assert set(ranks) == {"rank 0 running", "rank 0 waiting", "rank 1 running", "rank 1 waiting"}
    assert set(known(ranks["rank 1 waiting"])) == {0} and max(known(ranks["rank 0 waiting"])) > 0
    assert set(known(ranks["rank 0 running"])) == {8} and set(known(ranks["rank 1 running"])) == {2}
    assert set(rank_kv) == {"rank 0", "rank 1"} and max(known(rank_kv["rank 1"])) < max(known(rank_kv["rank 0"]))
    # The fake server refuses nothing: the client's refusals are charted as none, beside the engine's
    # (its payload has no admission counter, as vLLM before 0.32: a gap, never zeros).
    assert set(rejections) == {"client", "engine"} and known(rejections["client"])
    assert set(known(rejections["client"])) == {0} and not known(rejections["engine"])
    assert stage_marks[:2] == ["warmup", "load"]
    # The fake server sends no engine account: the parts named are the client's own, before and after the headers.
    assert slow_rows[0].split("\t")[:2] == ["request id", "scenario"]
    client_parts = ("the wait from the response headers to the first token", "reaching the server")
    assert all(any(part in row for part in client_parts) and "(median" in row for row in slow_rows[1:]), slow_rows
    assert float(slow_rows[1].split("\t")[2]) >= 50  # TTFT, ms: the fake server's 50
    assert "http_500" in failures and max(known(failures["http_500"])) > 0
    assert down_bands >= 1
    assert dark is True
    assert "Results JSON (loadwatch)" in links and "Per-request records, JSON lines (loadwatch)" in links
    assert json.loads(download)["completed"] > 0
    assert "Report page, report.html (loadwatch)" in links
    assert "Bokeh" in page_download and "The engine's side is missing: this run has no Prometheus data" in page_download
