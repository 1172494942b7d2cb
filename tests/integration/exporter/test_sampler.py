"""The sidecar against real local HTTP servers: healthy, down, slow and garbage targets."""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from loadwatch.exporter.collector import EngineCollector
from loadwatch.exporter.sampler import TargetSampler
from loadwatch.exporter.settings import Target
from tests.conftest import closed_port

PAYLOAD = (Path(__file__).resolve().parents[2] / "data" / "payloads" / "vllm-0.32-kv-pressure.txt").read_bytes()


class Handler(BaseHTTPRequestHandler):
    body = PAYLOAD
    delay = 0.0
    authorization: str | None = None  # the header a request must carry, else 401

    def do_GET(self):
        time.sleep(self.delay)
        if self.authorization and self.headers.get("Authorization") != self.authorization:
            self.send_response(401)
            self.end_headers()
            return
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(self.body)
        except BrokenPipeError:
            pass  # a sampler that timed out has hung up: what the slow-target tests want

    def log_message(self, *args):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(body: bytes = PAYLOAD, delay: float = 0.0, authorization: str | None = None) -> str:
        handler = type("H", (Handler,), {"body": body, "delay": delay, "authorization": authorization})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


def sampler(name: str, url: str, timeout: float = 0.5) -> TargetSampler:
    return TargetSampler(Target(name=name, url=url), interval=0.2, window=5.0, timeout=timeout)


def exposition(samplers) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(samplers))
    text = generate_latest(registry).decode()
    families = list(text_string_to_metric_families(text))
    names = [f.name for f in families]
    assert len(names) == len(set(names)), "each family once, whatever the number of targets"
    return {f.name: f for f in families}


def test_down_slow_and_garbage_targets_show_up_0_and_no_engine_series(serve):
    samplers = [
        sampler("good", serve()),
        sampler("down", f"http://127.0.0.1:{closed_port()}"),
        sampler("garbage", serve(b"<html>not metrics {{{</html>")),
        sampler("slow", serve(delay=2.0), timeout=0.3),
    ]
    started = time.monotonic()
    for s in samplers:
        s.sample_once()
    assert time.monotonic() - started < 2.0, "the slow target must be cut at its timeout"
    families = exposition(samplers)
    up = {s.labels["target"]: s.value for s in families["loadwatch_engine_up"].samples}
    assert up == {"good": 1.0, "down": 0.0, "garbage": 0.0, "slow": 0.0}
    own = {"loadwatch_engine_up", "loadwatch_engine_scrape_duration_seconds", "loadwatch_engine_scrape_errors"}
    engine_targets = {s.labels["target"] for name, f in families.items() if name not in own for s in f.samples}
    assert engine_targets == {"good"}
    failed = {(s.labels["target"], s.labels["reason"]) for s in families["loadwatch_engine_scrape_errors"].samples
              if s.name.endswith("_total") and s.value == 1}
    assert failed == {("down", "connection"), ("garbage", "parse"), ("slow", "timeout")}
    kv = families["loadwatch_engine_kv_cache_usage_ratio"].samples[0]
    assert kv.labels == {"target": "good", "model": "tiny", "engine": "0"}


def test_two_targets_share_families_and_a_target_going_down_drops_its_series(serve):
    a, b = sampler("a", serve()), sampler("b", serve())
    for s in (a, b):
        s.sample_once()
    running = exposition([a, b])["loadwatch_engine_requests_running"]
    assert sorted(s.labels["target"] for s in running.samples) == ["a", "b"]
    b.target = Target(name="b", url=f"http://127.0.0.1:{closed_port()}")
    b.sample_once()
    running = exposition([a, b])["loadwatch_engine_requests_running"]
    assert [s.labels["target"] for s in running.samples] == ["a"]


def test_a_state_change_is_logged_once(serve, caplog):
    good_url = serve()
    s = sampler("flappy", f"http://127.0.0.1:{closed_port()}")
    with caplog.at_level(logging.INFO, logger="loadwatch.exporter.sampler"):
        for _ in range(3):
            s.sample_once()
        s.target = Target(name="flappy", url=good_url)
        for _ in range(3):
            s.sample_once()
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "is down" in m]) == 1
    assert len([m for m in messages if "is up" in m]) == 1


def test_threads_keep_sampling_the_good_target_while_another_hangs(serve):
    good, slow = sampler("good", serve()), sampler("slow", serve(delay=5.0), timeout=2.0)
    for s in (good, slow):
        s.start()
    try:
        time.sleep(1.5)
        assert good.reading.up and len(good.window) >= 4
        assert not slow.reading.up
    finally:
        for s in (good, slow):
            s.stop()
