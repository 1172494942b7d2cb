"""The embedded engine with a deliberately tiny KV cache (as `make run` starts it: 20 blocks of 32
tokens, 8 sequences at most), started once for both tests here: the saturation alert fires, is
delivered to a webhook through Alertmanager, and resolves; and watching only the web UI, a user sees
TTFT rise as the cache fills, Locust's LLM tab charting the sidecar's view of the engine while users
step up from 2 to 8."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from loadwatch.engine.small import SMALL_KV
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import down, up
from tests.conftest import REPO, embedded_engine, finish, free_port, get, locust_command, wait_for
from tests.integration.test_webui_charts import llm_tab, series


@pytest.fixture(scope="module")
def small_engine():
    with embedded_engine(*SMALL_KV) as info:
        yield info


# 20 blocks of 32 tokens (19 usable) shared by up to 8 sequences of up to 288 tokens: 12 users
# asking for 200 tokens each keep it full, preempting, with the rest waiting.


class Webhook:
    def __init__(self) -> None:
        self.notifications: list[dict] = []
        received = self.notifications

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"

    def saw(self, alertname: str, status: str) -> bool:
        return any(a["labels"]["alertname"] == alertname and a["status"] == status
                   for n in self.notifications for a in n["alerts"])


def short_rules(tmp_path):
    """The repository's rules with every `for:` cut to 5 s, so the test needs no minutes."""
    rules = tmp_path / "rules"
    rules.mkdir()
    for path in (REPO / "prometheus" / "rules").glob("*.yml"):
        data = yaml.safe_load(path.read_text())
        for group in data["groups"]:
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = "5s"
        (rules / path.name).write_text(yaml.safe_dump(data, sort_keys=False))
    return rules


def test_tiny_kv_cache_fires_saturation_alert_through_alertmanager_and_resolves(small_engine, tmp_path):
    webhook = Webhook()
    # 2 s scrapes: a 1 s scrape timeout is too tight while vLLM takes every spare cycle. The 10 s
    # window holds the KV peak through the dips between preemptions.
    settings = StackSettings(home=tmp_path / "home", rules_dir=short_rules(tmp_path), scrape_interval="2s",
                             evaluation_interval="1s", exporter_window=10.0, group_wait="1s", group_interval="2s",
                             webhook_url=webhook.url)
    stack = up(settings, tmp_path / "run", target=small_engine.url, client_port=0)
    load = None
    try:
        load = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H", stack.servers.url,
             "--headless", "-u", "12", "-r", "12", "-t", "90s", "--metrics-port", "0", "--max-tokens", "200",
             "--ignore-eos"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        prometheus = stack.url("prometheus")

        def firing_in_prometheus() -> bool:
            alerts = json.loads(get(prometheus + "/api/v1/alerts"))["data"]["alerts"]
            return any(a["labels"]["alertname"] == "VLLMKVCacheSaturated" and a["state"] == "firing" for a in alerts)

        wait_for(firing_in_prometheus, 75, "VLLMKVCacheSaturated firing in Prometheus")
        wait_for(lambda: webhook.saw("VLLMKVCacheSaturated", "firing"), 30, "the firing alert at the webhook")
        load.terminate()
        load.wait(30)
        wait_for(lambda: webhook.saw("VLLMKVCacheSaturated", "resolved"), 60, "the resolved alert at the webhook")
    finally:
        if load is not None and load.poll() is None:
            load.kill()
        down(settings)
        webhook.server.shutdown()
    # Other alerts (preemptions, the queue) may fire too with `for:` cut to 5 s: look at this one.
    alert = next(a for n in webhook.notifications for a in n["alerts"]
                 if a["status"] == "firing" and a["labels"]["alertname"] == "VLLMKVCacheSaturated")
    assert alert["labels"]["severity"] == "warning" and alert["labels"]["target"] == "vllm"  # a cause: it warns
    assert "KV cache usage with requests waiting" in alert["annotations"]["description"]


STAGE = 6.0  # seconds each step of users lasts


def in_stage(values: list, stages: list[dict], name: str) -> list[float]:
    start = next(s["t"] for s in stages if s["name"] == name) * 1000
    later = [s["t"] * 1000 for s in stages if s["t"] * 1000 > start]
    end = min(later) if later else float("inf")
    return [v for t, v in values if start <= t < end and v is not None]


@pytest.mark.browser
@pytest.mark.needs("chromium")
def test_ttft_rises_in_the_web_ui_as_the_kv_cache_fills(small_engine, tmp_path):
    from playwright.sync_api import sync_playwright

    settings = StackSettings(home=tmp_path / "home")
    stack = up(settings, tmp_path / "run", target=small_engine.url, client_port=0)
    web_port = free_port()
    locust = subprocess.Popen(
        locust_command("-H", stack.servers.url, "--web-host", "127.0.0.1", "--web-port", str(web_port),
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
    # The chart's usage is in percent of 19 usable blocks, so one block is 5.3 %: eight users may hold
    # the cache at 17 blocks (89.5 %) through the whole step, the rest of them waiting. Two users'
    # 200-token answers can already fill it for a moment, so the first step's peak may equal the
    # last's: the cache is fuller through the last step.
    assert max(kv_last) >= 85 and sum(kv_last) / len(kv_last) > sum(kv_first) / len(kv_first), (kv_first, kv_last)
    assert sum(last) / len(last) > 2 * sum(first) / len(first), (first, last)
