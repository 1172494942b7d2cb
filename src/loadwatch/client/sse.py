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

    def take(self, buffer: bytearray, reads: list[int]) -> tuple[list[bytes], list[int]]:
        """The events of the whole lines at the start of `buffer` (an HTTP body as it is read), taken
        out of it, each with the read that completed it: `reads` holds the buffer's length after each
        read since the last take, the last its length now. An unfinished line stays where it is until
        the rest of it comes.

        A body of events of one `data:` line each, as vLLM writes its chunks, is split at once, not line by
        line (the per-chunk path); any other is fed read by read."""
        end = buffer.rfind(b"\n") + 1
        if not end:
            return [], []
        lines = bytes(buffer[:end])
        del buffer[:end]
        events: list[bytes] = []
        completed: list[int] = []
        if not self._pending and not self._data and b"\r" not in lines:
            pieces = lines.split(b"\n\n")
            if not pieces.pop() and lines.count(b"\n") == 2 * len(pieces):  # no line but `data:` and blank ones
                read = at = 0
                for piece in pieces:
                    if not piece.startswith(b"data: "):
                        break
                    at += len(piece) + 2
                    while reads[read] < at:
                        read += 1
                    events.append(piece[6:])
                    completed.append(read)
                else:
                    return events, completed
                events, completed = [], []
        start = 0
        for read, length in enumerate(reads):
            if length > start:
                got = self.feed(lines[start:length])
                events += got
                completed += [read] * len(got)
                start = length
                if start >= end:
                    break
        return events, completed

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
