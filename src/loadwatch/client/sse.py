"""Incremental decoder for Server-Sent Events, as OpenAI-compatible servers stream them.

Written by hand rather than taken from sseclient/httpx-sse: those wrap a whole HTTP client,
while the load generator must timestamp each network read itself and keep the per-chunk path
to a few bytes operations. It works on bytes and gives bytes: a payload goes to orjson as it
came, which checks its UTF-8 while it parses (a decode to str first cost a copy per chunk).
"""

from __future__ import annotations

DONE = b"[DONE]"  # the payload that ends an OpenAI-style stream


class SSEDecoder:
    """Feed raw bytes in any split; get back the `data` payload of each completed event."""

    __slots__ = ("_data", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[bytes] = []

    def take(self, buffer: bytearray) -> list[bytes]:
        """`feed` for the whole lines at the start of `buffer` (an HTTP body as it is read), taken out
        of it: an unfinished line stays where it is until the rest of it comes.

        A read mostly brings one whole event of one line, as vLLM writes each chunk: its payload is
        taken at once, without the lines made of it one by one (the per-chunk path)."""
        end = buffer.rfind(b"\n")
        if end < 0:
            return []
        if end == len(buffer) - 1 and not self._data and not self._pending and buffer.startswith(b"data: ") \
                and buffer.find(b"\n") == end - 1 and buffer[-3] != 13:  # 13: a CR before the blank line
            payload = bytes(buffer[6:-2])
            buffer.clear()
            return [payload]
        lines = bytes(buffer[:end + 1])
        del buffer[:end + 1]
        return self.feed(lines)

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._pending + chunk if self._pending else chunk
        end = buf.rfind(b"\n")
        if end < 0:
            self._pending = buf
            return []
        self._pending = buf[end + 1:]
        events: list[bytes] = []
        data = self._data
        for line in buf[:end].split(b"\n"):
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    events.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data.clear()
            elif line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b" ", 5) else line[5:])
            # Comments (":"), "event:", "id:" and "retry:" carry nothing the metrics need.
        return events

    def close(self) -> list[bytes]:
        """Events left when the stream ends without a final blank line."""
        return self.feed(b"\n\n") if self._pending or self._data else []
