"""With $http_proxy set and no $no_proxy, loadwatch still reaches its own local servers."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from loadwatch.loopback import is_loopback
from loadwatch.processes import answers
from loadwatch.prometheus import PrometheusAPI


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "success", "data": {"result": [{"value": [0, "1"]}]}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def local_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def dead_proxy(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # discard port: nothing listens
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


def test_readiness_and_prometheus_queries_skip_the_proxy_for_loopback(local_server, dead_proxy):
    assert answers(local_server + "/-/ready")
    assert PrometheusAPI(local_server).scalar("up", 0.0) == 1.0


def test_what_counts_as_loopback():
    assert is_loopback("http://127.0.0.1:9090") and is_loopback("http://127.8.0.1/") and is_loopback("http://[::1]:1")
    assert is_loopback("http://localhost:8000")
    assert not is_loopback("http://prometheus.internal:9090") and not is_loopback("http://10.0.0.1/")
