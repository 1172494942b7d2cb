"""A deliberately tiny KV cache on the real engine: the saturation alert fires, is delivered, resolves."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

from loadwatch.engine.small import SMALL_KV
from loadwatch.stack.settings import StackSettings
from loadwatch.stack.stack import down, up
from tests.conftest import REPO, get, wait_for

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


def test_tiny_kv_cache_fires_saturation_alert_through_alertmanager_and_resolves(tmp_path):
    webhook = Webhook()
    # 2 s scrapes: a 1 s scrape timeout is too tight while vLLM takes every spare cycle. The 10 s
    # window holds the KV peak through the dips between preemptions.
    settings = StackSettings(home=tmp_path / "home", rules_dir=short_rules(tmp_path), scrape_interval="2s",
                             evaluation_interval="1s", exporter_window=10.0, group_wait="1s", group_interval="2s",
                             webhook_url=webhook.url)
    stack = up(settings, tmp_path / "run", vllm_args=SMALL_KV, client_port=0)
    load = None
    try:
        load = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H", stack.target,
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
    assert alert["labels"]["severity"] == "critical" and alert["labels"]["target"] == "vllm"
    assert "KV cache usage with requests waiting" in alert["annotations"]["description"]
