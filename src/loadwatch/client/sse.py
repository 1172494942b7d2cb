"""Incremental decoder for Server-Sent Events, as OpenAI-compatible servers stream them.

Written by hand rather than taken from sseclient/httpx-sse: those wrap a whole HTTP client,
while the load generator must timestamp each network read itself and keep the per-chunk path
to a few string operations.
"""

from __future__ import annotations

from loadwatch.client.failures import Reason, RequestFailed


class SSEDecoder:
    """Feed raw bytes in any split; get back the `data` payload of each completed event."""

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        buf = self._pending + chunk if self._pending else chunk
        end = buf.rfind(b"\n")
        if end < 0:
            self._pending = buf
            return []
        self._pending = buf[end + 1:]
        try:  # every complete line at once: one decode, one split (the per-chunk path, see client/reading.py)
            text = buf[:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestFailed(Reason.MALFORMED_CHUNK, f"not UTF-8: {buf[max(0, exc.start - 40):exc.start + 40]!r}") \
                from exc
        events: list[str] = []
        for line in text.split("\n"):
            if line.endswith("\r"):
                line = line[:-1]
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
            elif line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
            # Comments (":"), "event:", "id:" and "retry:" carry nothing the metrics need.
        return events

    def close(self) -> list[str]:
        """Events left when the stream ends without a final blank line."""
        events = self.feed(b"\n\n") if self._pending or self._data else []
        return events
