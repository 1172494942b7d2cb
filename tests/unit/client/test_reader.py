"""The hub reads a stream in whatever pieces its bytes come (a UTF-8 character split across reads, CRLF
lines, keep-alive comments), stamps each read that delivered text, and lets a stream go when its
request's greenlet is interrupted: the connection is closed, so the server sees the client leave.
Its events are taken out of its body later than they are read, each stamped with its read all the
same. Through a gevent socket pair: no process, no server."""

from __future__ import annotations

import gevent
import pytest
from gevent import socket
from geventhttpclient.response import HTTPResponse, HTTPSocketResponse

from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.client.reader import follow
from loadwatch.client.reading import CATCH_UP, Reading

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def event(text: str, finish: str | None = None) -> bytes:
    finish_reason = f'"{finish}"' if finish else "null"
    return (f'data: {{"choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":{finish_reason}}}]}}'
            "\r\n\r\n").encode()


def chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body)


def opened() -> tuple[HTTPSocketResponse, socket.socket]:
    ours, theirs = socket.socketpair()
    theirs.sendall(HEAD)
    return HTTPSocketResponse(ours, method="POST"), theirs


def test_a_stream_in_pieces_is_read_whole_and_each_read_with_text_is_stamped():
    response, theirs = opened()
    first = b": keep-alive\r\n\r\n" + event("h\u00e9")
    split = first.index("\u00e9".encode()) + 1  # inside the two bytes of the character
    pieces = [chunked(first)[: split + 4], chunked(first)[split + 4:],
              chunked(event("llo", "stop") + b"data: [DONE]\r\n\r\n") + b"0\r\n\r\n"]

    def write() -> None:
        for piece in pieces:
            theirs.sendall(piece)
            gevent.sleep(0.02)

    writer = gevent.spawn(write)
    arrivals: list[float] = []
    reading = Reading("chat", response, 1 << 20, arrivals, None)
    follow(reading)
    writer.join()
    assert "".join(reading.answer.content) == "h\u00e9llo"
    assert reading.done and reading.finished
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 0.015  # stamped at the reads, 20 ms apart


def test_a_request_interrupted_while_its_stream_is_read_lets_it_go_and_hangs_up():
    response, theirs = opened()
    theirs.sendall(chunked(event("hi")))
    reading = Reading("chat", response, 1 << 20, [], None)
    with pytest.raises(gevent.Timeout), gevent.Timeout(0.1):
        follow(reading)
    assert len(reading.arrivals) == 1
    theirs.settimeout(5)
    assert theirs.recv(1) == b""  # the client closed its end


def test_an_error_event_fails_the_request_at_its_read_though_the_stream_stalls_after_it():
    response, theirs = opened()
    theirs.sendall(chunked(event("hi")) + chunked(b'data: {"error": {"message": "engine died"}}\n\n'))
    reading = Reading("chat", response, 1 << 20, [], None)
    with pytest.raises(RequestFailed, match="engine died") as failed, gevent.Timeout(2):
        follow(reading)
    assert failed.value.reason == Reason.STREAM_ERROR and len(reading.arrivals) == 1


def test_a_long_stream_is_taken_as_it_goes_each_event_stamped_with_its_read():
    """Its events are taken after CATCH_UP bytes: what a stream holds stays bounded."""
    response = HTTPResponse()
    arrivals: list[float] = []
    reading = Reading("chat", response, 1 << 20, arrivals, None)
    assert not reading.take(HEAD, 0.0)
    reads = 4 * CATCH_UP // len(chunked(event("word")))
    for read in range(1, reads + 1):
        assert not reading.take(chunked(event("word")) * (1 + read % 2), float(read))  # one or two events a read
        assert len(response._body_buffer) < CATCH_UP
    assert reading.take(chunked(event("end", "stop") + b"data: [DONE]\n\n") + b"0\r\n\r\n", reads + 1.0)
    assert arrivals == [float(read) for read in range(1, reads + 1) for _ in range(1 + read % 2)] + [reads + 1.0]
    assert "".join(reading.answer.content) == "word" * (len(arrivals) - 1) + "end" and reading.done
