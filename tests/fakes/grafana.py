"""A local HTTP server answering Grafana's annotation API (POST /api/annotations), for tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeGrafana:
    def __init__(self, token: str = "glsa_test") -> None:
        self.posted: list[dict] = []
        self.auth: list[str | None] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.auth.append(self.headers.get("Authorization"))
                if self.path != "/api/annotations":
                    return self._answer(404, {"message": "Not found"})
                if self.headers.get("Authorization") != f"Bearer {token}":
                    return self._answer(401, {"message": "invalid API key"})
                owner.posted.append(body)
                self._answer(200, {"id": len(owner.posted), "message": "Annotation added"})

            def _answer(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
