"""The embedded engine killed and started again in the middle of a run: every request that reached
the server is counted once by loadwatch, as a success or a classified failure.

vLLM's own counters die with it, so the server side is counted by a small proxy in front of it:
one request per connection (it asks both sides to close after each), counted when the proxy has
read it whole, whether or not the engine is there to answer.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

from loadwatch.engine import process
from loadwatch.engine.settings import EngineSettings
from loadwatch.engine.setup import ensure_engine, ensure_model
from tests.conftest import REPO, free_port


def _close_after(head: bytes) -> bytes:
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join(lines[:-2] + [b"Connection: close", b"", b""])


def _read_head(sock: socket.socket, buffered: bytes = b"") -> tuple[bytes, bytes]:
    """(the head up to its blank line, what came after it)"""
    while b"\r\n\r\n" not in buffered:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed before the head ended")
        buffered += data
    at = buffered.index(b"\r\n\r\n") + 4
    return buffered[:at], buffered[at:]


class CountingProxy:
    """Blocking sockets, not asyncio: the tests run gevent-patched, where a thread is a greenlet of
    the main thread, and a running asyncio loop there would stay visible to later tests."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port, self.received = upstream_port, 0
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy.serve(self.request)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def serve(self, client: socket.socket) -> None:
        try:
            head, rest = _read_head(client)
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(rest) < length:
                rest += client.recv(65536)
            if head.startswith(b"POST /v1/chat/completions"):
                self.received += 1
            with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=60) as upstream:
                upstream.sendall(_close_after(head) + rest[:length])
                answer_head, answer_rest = _read_head(upstream)
                client.sendall(_close_after(answer_head) + answer_rest)
                while data := upstream.recv(65536):
                    client.sendall(data)
        except OSError:
            pass  # the engine is down or died mid-answer: the client sees its connection end

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_run_across_an_engine_restart_counts_every_request_once(tmp_path):
    settings = EngineSettings()
    ensure_engine(settings)
    model = ensure_model(settings)
    port = free_port()
    engine = process.start(settings, model, port)
    proxy = CountingProxy(port)
    results = tmp_path / "results.json"
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H",
         f"http://127.0.0.1:{proxy.port}", "--headless", "-u", "4", "-r", "4", "-t", "75s", "--stop-timeout", "30",
         "--max-tokens", "32", "--request-timeout", "20", "--metrics-port", "0", "--results-json", str(results)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(12)
        before_kill = proxy.received
        os.killpg(engine.pid, signal.SIGKILL)  # a crash, not a shutdown
        process.stop(settings)
        time.sleep(2)
        engine = process.start(settings, model, port)
        restarted_at = proxy.received
        output, _ = locust.communicate(timeout=180)
    finally:
        if locust.poll() is None:
            locust.kill()
        process.stop(settings)
        proxy.close()
    data = json.loads(Path(results).read_text())
    print(f"engine restart: proxy received {proxy.received} ({before_kill} before the crash, {restarted_at} by the "
          f"restart); loadwatch: {data['completed']} completed, {data['failed']} failed {data['failures']}")
    assert before_kill > 0 and proxy.received > restarted_at, "load before the crash and after the restart"
    assert data["completed"] + data["failed"] == proxy.received, (data["failures"], output[-3000:])
    # The random-weights model may end a completion at once (empty_completion): a real outcome too.
    assert data["failures"].get("connection", 0) + data["failures"].get("stream_cut", 0) > 0
    assert set(data["failures"]) <= {"connection", "stream_cut", "http_500", "http_502", "empty_completion"}
    assert "Traceback" not in output
