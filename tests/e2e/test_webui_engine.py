"""Watching only the web UI, a user sees TTFT rise as the KV cache fills: the embedded engine with
a KV cache of 20 blocks (as `make run` starts it), the stack up, Locust's web UI charting the
sidecar's view of the engine while users step up from 2 to 8."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from loadwatch.engine.small import SMALL_KV
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import down, up
from tests.conftest import finish, free_port, get, locust_command, wait_for
from tests.integration.test_webui_charts import llm_tab, series

pytestmark = pytest.mark.browser
STAGE = 6.0  # seconds each step of users lasts


def in_stage(values: list, stages: list[dict], name: str) -> list[float]:
    start = next(s["t"] for s in stages if s["name"] == name) * 1000
    later = [s["t"] * 1000 for s in stages if s["t"] * 1000 > start]
    end = min(later) if later else float("inf")
    return [v for t, v in values if start <= t < end and v is not None]


@pytest.mark.needs("chromium")
def test_ttft_rises_in_the_web_ui_as_the_kv_cache_fills(tmp_path):
    from playwright.sync_api import sync_playwright

    settings = StackSettings(home=tmp_path / "home")
    stack = up(settings, tmp_path / "run", vllm_args=SMALL_KV, client_port=0)
    web_port = free_port()
    locust = subprocess.Popen(
        locust_command("-H", stack.target, "--web-host", "127.0.0.1", "--web-port", str(web_port),
                       "--metrics-port", "0", "--autostart", "--shape", "step", "-u", "8", "--step-size", "2",
                       "--stage-duration", f"{STAGE:g}", "--max-tokens", "200", "--ignore-eos",
                       "--engine-metrics", stack.engine_metrics),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    ui = f"http://127.0.0.1:{web_port}/"
    try:
        wait_for(lambda: get(ui), 30, "the web UI")
        with sync_playwright() as p:
            browser, page = llm_tab(p, ui)
            wait_for(lambda: any(s["name"] in ("stopping", "stopped")
                                 for s in page.evaluate("() => window.loadwatchCockpit.stages")),
                     5 * STAGE + 30, "the four steps to run")
            stages = page.evaluate("() => window.loadwatchCockpit.stages")
            ttft = series(page, "ttft")["client p99"]
            kv = series(page, "kv")["usage"]
            page.screenshot(path=str(tmp_path / "llm-tab.png"), full_page=True)
            if os.environ.get("LOADWATCH_SCREENSHOT"):  # README's picture: LOADWATCH_SCREENSHOT=docs/llm-tab.png
                shutil.copyfile(tmp_path / "llm-tab.png", os.environ["LOADWATCH_SCREENSHOT"])
            browser.close()
    finally:
        finish(locust)
        down(settings)

    first, last = in_stage(ttft, stages, "step-1"), in_stage(ttft, stages, "step-4")
    kv_first, kv_last = in_stage(kv, stages, "step-1"), in_stage(kv, stages, "step-4")
    assert first and last and kv_first and kv_last, stages
    assert max(kv_last) >= 0.9 and max(kv_last) > max(kv_first), (kv_first, kv_last)
    assert sum(last) / len(last) > 2 * sum(first) / len(first), (first, last)
