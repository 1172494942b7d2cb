"""The complete lines of a streamed HTTP body, each at most `limit` bytes, reading in a way that yields.

geventhttpclient's readline searches its whole buffer again after every read and has no bound:
one endless line grows memory and CPU without end, and while bytes keep arriving it never yields,
so no other user, heartbeat or scrape of the process runs. This reader resumes its search where
it stopped, fails a line past the limit as malformed, and lets other greenlets run between reads.
It hands over every complete line a read brought at once (an SSE event is two lines, often more
arrive together): the per-chunk path is the load generator's cost, and a call per line doubled it.
It works on geventhttpclient's response buffer (pinned in pyproject.toml; tests/unit/client cover it).
"""

from __future__ import annotations

import gevent
from geventhttpclient.response import HTTPSocketResponse

from loadwatch.client.failures import Reason, RequestFailed


def read_lines(response: HTTPSocketResponse, limit: int) -> bytes:
    """The complete lines buffered, each with its b"\\n", reading until there is one; at the body's
    end what is left (b"" when nothing)."""
    buffer = response._body_buffer
    searched = 0
    while True:
        at = buffer.rfind(b"\n", searched)
        if at >= 0:
            lines = bytes(buffer[: at + 1])
            del buffer[: at + 1]
            return lines
        searched = len(buffer)
        if searched > limit:
            raise RequestFailed(Reason.MALFORMED_CHUNK, f"a line of the stream is over {limit} bytes")
        if response.message_complete:
            rest = bytes(buffer)
            del buffer[:]
            return rest
        sock = response._sock
        if sock is None:
            raise ConnectionResetError("connection closed")
        if searched:
            gevent.sleep(0)  # a line spread over many reads: let the rest of the process run
        try:
            response.feed(sock.recv(response.block_size))
        except BaseException:
            response.release()
            raise
