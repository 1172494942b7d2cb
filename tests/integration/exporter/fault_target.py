"""A /metrics target that misbehaves on demand, at the socket level: what an engine killed while
answering, a port that is not HTTP, a drip, a redirect or a huge body look like to the sidecar."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from pathlib import Path

PAYLOAD = (Path(__file__).resolve().parents[2] / "data" / "payloads" / "vllm-0.32-kv-pressure.txt").read_bytes()


def _head(length: int) -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {length}\r\n\r\n".encode()


class FaultTarget:
    """Serves `mode`, which a test may change while the sidecar samples it."""

    def __init__(self, mode: str = "good") -> None:
        self.mode = mode
        target = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(30)
                try:
                    self.request.recv(65536)
                    target.answer(self.request)
                except OSError:
                    pass  # the sidecar hung up first: often the point

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, conn: socket.socket) -> None:
        mode = self.mode
        if mode == "good":
            conn.sendall(_head(len(PAYLOAD)) + PAYLOAD)
        elif mode == "cut":  # killed while answering: fewer bytes than announced, then closed
            conn.sendall(_head(len(PAYLOAD)) + PAYLOAD[: len(PAYLOAD) // 3])
        elif mode == "not_http":
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
        elif mode == "drip":  # headers, then a byte every half second for ever
            conn.sendall(_head(len(PAYLOAD)))
            for byte in PAYLOAD:
                conn.sendall(bytes([byte]))
                time.sleep(0.5)
        elif mode == "drip_headers":
            for byte in _head(len(PAYLOAD)):
                conn.sendall(bytes([byte]))
                time.sleep(0.5)
        elif mode == "redirect":
            conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://192.0.2.1/metrics\r\nContent-Length: 0\r\n\r\n")
        elif mode == "huge":
            size = 17 * 2**20
            conn.sendall(_head(size))
            chunk = b"# " + b"x" * 65534
            for _ in range(size // len(chunk)):
                conn.sendall(chunk)
        elif mode == "garbage":
            body = bytes(range(256)) * 40
            conn.sendall(_head(len(body)) + body)
        elif mode == "silent":  # accepts, reads, never answers
            time.sleep(30)
        else:
            raise ValueError(mode)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
