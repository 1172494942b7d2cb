"""A failed request keeps the replica a router named in its answer's headers (smg's x-smg-routed-worker-id):
an error status the replica sent and smg passed on, a stream cut after its headers; an error smg made
itself, or a connection lost before any header, names none. The answers are written as smg 1.13 sends
them (checked with the real smg in front of tests/sse_server.py), read through a gevent socket pair: no process."""

from __future__ import annotations

import pytest
from gevent import socket

from loadwatch.client.heard import ROUTED_TO
from loadwatch.client.stream import Streamer

WORKER = "http://127.0.0.1:8001"
CHUNK = (b'data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
         b'"delta":{"content":"hi "}}]}\n\n')
DONE_STREAM = (CHUNK + b'data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
               b'"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,'
               b'"total_tokens":4}}\n\ndata: [DONE]\n\n')
# A replica's stream cut mid-way: smg ends its 200 with an error event of its own, and [DONE].
SMG_CUT = (CHUNK + b'data: {"error":{"message":"Stream error: error decoding response body: unexpected EOF during '
           b'chunk size line","type":"stream_error"}}\n\ndata: [DONE]\n\n')


def answer(status: str, headers: dict[str, str], body: bytes, *, cut: bool = False) -> bytes:
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    if cut:  # chunked, and the connection closes in the middle of the body
        return (f"HTTP/1.1 {status}\r\n{head}content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                ).encode() + f"{len(body):x}\r\n".encode() + body + b"\r\n" + b"400\r\npartial"
    return f"HTTP/1.1 {status}\r\n{head}content-length: {len(body)}\r\n\r\n".encode() + body


class OnePool:
    """Stands in for geventhttpclient's connection pool: each connection it gives has these bytes to
    answer with, the server gone after them (or none is made: refused)."""

    def __init__(self, raw: bytes | None) -> None:
        self.raw = raw

    def get_socket(self) -> socket.socket:
        if self.raw is None:
            raise ConnectionRefusedError("refused")
        ours, theirs = socket.socketpair()
        theirs.sendall(self.raw)
        theirs.close()
        return ours

    def release_socket(self, sock: socket.socket) -> None:
        sock.close()

    return_socket = release_socket


class OneAnswer:
    """Stands in for geventhttpclient's client, whose pool a stream's request is sent through."""

    host, port = "127.0.0.1", 8000

    def __init__(self, raw: bytes | None) -> None:
        self._connection_pool = OnePool(raw)

    def close(self) -> None:
        pass


def streamed(raw: bytes | None):
    streamer = Streamer("http://127.0.0.1:8000", None, timeout=10.0, max_line_bytes=1 << 20)
    client = OneAnswer(raw)
    streamer._http = lambda: client  # type: ignore[method-assign]
    return streamer.stream("chat", {"model": "m", "messages": [], "stream": True})


ERROR = b'{"error": {"message": "injected", "code": 500}}'


@pytest.mark.parametrize(("raw", "reason", "routed_to"), [
    (answer("500 Internal Server Error", {ROUTED_TO: WORKER}, ERROR), "http_500", WORKER),
    (answer("400 Bad Request", {ROUTED_TO: WORKER}, ERROR), "http_400", WORKER),
    (answer("429 Too Many Requests", {ROUTED_TO: WORKER, "retry-after": "1"}, ERROR), "http_429", WORKER),
    (answer("200 OK", {ROUTED_TO: WORKER, "content-type": "text/event-stream"}, SMG_CUT), "stream_error", WORKER),
    (answer("200 OK", {ROUTED_TO: WORKER}, CHUNK, cut=True), "stream_cut", WORKER),
    # smg's own errors: no worker answered (call_upstream_request_error), none serves the model
    (answer("500 Internal Server Error", {"x-smg-error-code": "call_upstream_request_error"}, ERROR), "http_500", None),
    (answer("404 Not Found", {"x-smg-error-code": "model_not_found"}, ERROR), "http_404", None),
    (None, "connection", None),
], ids=["500", "400", "429", "smg-cut-event", "cut", "smg-upstream-error", "smg-no-worker", "refused"])
def test_a_failed_request_keeps_the_replica_its_answers_headers_named_and_no_other(raw, reason, routed_to):
    result = streamed(raw)
    assert result.failure is not None and result.failure.reason == reason, result.failure
    assert result.routed_to == routed_to and result.timing is None


def test_a_success_names_its_replica_in_its_result_as_a_failure_does():
    result = streamed(answer("200 OK", {ROUTED_TO: WORKER, "content-type": "text/event-stream"}, DONE_STREAM))
    assert result.failure is None and result.timing is not None
    assert result.routed_to == WORKER


def test_an_interim_answer_is_followed_by_the_final_one():
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n"
    result = streamed(interim + answer("200 OK", {"content-type": "text/event-stream"}, DONE_STREAM))
    assert result.failure is None and result.timing is not None and result.timing.completion_tokens == 1


def test_a_refusal_whose_body_is_cut_is_still_that_refusal_with_its_retry_after():
    raw = answer("429 Too Many Requests", {"retry-after": "7"}, ERROR)
    result = streamed(raw[:-10])  # the server went before the end of its body
    assert result.failure is not None and result.failure.reason == "http_429"
    assert result.failure.retry_after == 7.0


def test_a_connection_lost_before_any_answer_names_the_server():
    result = streamed(b"")
    assert result.failure is not None and result.failure.reason == "connection"
    assert "http://127.0.0.1:8000" in str(result.failure)
