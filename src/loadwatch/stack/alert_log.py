"""`loadwatch alert-log`: an Alertmanager webhook receiver that writes each alert as a line of its
log, so that alerts go somewhere on a machine or in a compose project that has no Slack or pager."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("loadwatch.alerts")
MAX_BODY = 2**20  # Alertmanager groups alerts; a megabyte is thousands of them


def alert_lines(payload: object) -> list[str]:
    """One line per alert of an Alertmanager webhook payload; ValueError if it is not one."""
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        raise ValueError("not an Alertmanager webhook payload: no `alerts` list")
    lines = []
    for alert in payload["alerts"]:
        labels, notes = alert.get("labels", {}), alert.get("annotations", {})
        where = " ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("alertname", "severity"))
        text = " ".join(t for t in (notes.get("summary"), notes.get("description")) if t)
        line = f"{alert.get('status', '?').upper()} {labels.get('alertname', '?')} [{labels.get('severity', 'none')}]"
        lines.append(line + (f" {where}" if where else "") + (f": {text}" if text else ""))
    return lines


def handler(write: Callable[[str], None]) -> type[BaseHTTPRequestHandler]:
    class Receiver(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(200 if self.path == "/-/ready" else 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._answer(413)
                return
            try:
                lines = alert_lines(json.loads(self.rfile.read(length)))
            except ValueError as exc:
                write(f"refused a POST to {self.path}: {exc}")
                self._answer(400)
                return
            for line in lines:
                write(line)
            self._answer(200)

        def _answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass  # the alerts are the log; requests are not

    return Receiver


def receiver(host: str, port: int, write: Callable[[str], None] = log.warning) -> ThreadingHTTPServer:
    """The server, to serve_forever; OSError when the address is taken."""
    return ThreadingHTTPServer((host, port), handler(write))
