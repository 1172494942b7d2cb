"""One bounded GET of a target's /metrics: a wall-clock deadline, a size limit, no redirect, no proxy.

urllib's timeout bounds each socket read, not the request: a target that drips a byte a second
would hold a sample for as long as it likes. Here a timer shuts the socket at the deadline,
whatever phase the request is in. Like Prometheus, the sidecar connects to its targets directly
(no HTTP proxy, so loopback is never sent to one) and follows no redirect.
"""

from __future__ import annotations

import http.client
import socket
import threading
from urllib.parse import urlsplit

from loadwatch.credentials import split_credentials

MAX_BYTES = 16 * 2**20  # vLLM's payload is ~50 KB; a body past this is not one
REASONS = ("timeout", "connection", "http_status", "too_large", "protocol", "parse", "internal")


class FetchError(Exception):
    """The sample failed; `reason` is one of REASONS, the message says what happened."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _cut(connection: http.client.HTTPConnection, fired: threading.Event) -> None:
    fired.set()
    if connection.sock is not None:
        try:
            connection.sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked read at once
        except OSError:
            pass


def fetch(url: str, deadline: float, max_bytes: int = MAX_BYTES) -> bytes:
    """The body of a 200 answer within `deadline` seconds, or FetchError."""
    url, credentials = split_credentials(url)
    parts = urlsplit(url)
    headers = {"Accept": "text/plain", "Accept-Encoding": "identity"}
    if credentials:
        headers["Authorization"] = credentials  # a proxy's Basic auth in front of vLLM
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=deadline)
    fired = threading.Event()
    timer = threading.Timer(deadline, _cut, (connection, fired))
    timer.daemon = True
    timer.start()
    try:
        connection.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                           headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            where = f" to {response.getheader('Location')}" if 300 <= response.status < 400 else ""
            raise FetchError("http_status", f"HTTP {response.status}{where}")
        body = response.read(max_bytes + 1)
        if len(body) > max_bytes:
            raise FetchError("too_large", f"body over {max_bytes} bytes")
        # read(n) returns what came before the peer closed; what was announced and not sent remains.
        if response.length:
            raise FetchError("protocol", f"the answer was cut: {response.length} announced bytes never came")
        return body
    except FetchError:
        raise
    except TimeoutError:
        raise FetchError("timeout", f"no whole answer within {deadline:g} s") from None
    except (http.client.HTTPException, ValueError) as exc:
        if fired.is_set():
            raise FetchError("timeout", f"no whole answer within {deadline:g} s") from None
        raise FetchError("protocol", f"not a valid HTTP answer ({type(exc).__name__}: {exc})") from None
    except OSError as exc:
        if fired.is_set():
            raise FetchError("timeout", f"no whole answer within {deadline:g} s") from None
        raise FetchError("connection", exc.strerror or str(exc) or type(exc).__name__) from None
    finally:
        timer.cancel()
        connection.close()
