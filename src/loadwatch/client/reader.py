"""A stream in flight is read by gevent's hub itself, not by its request's greenlet: the greenlet
waits once for its whole answer (headers and stream), not once per token.

Each token of a stream comes in a TCP segment of its own. Read by the request's greenlet, every token
cost a wake of that greenlet (a Waiter made, an io watcher started and stopped, two greenlet switches)
and a read through gevent's socket: the larger part of a chunk's CPU at a thousand streams a core
(benchmarks/chunk_profile.py). Here each stream's socket has one io watcher for the whole request, and
its callback runs in the hub, in the same pass of the event loop as every other stream that is ready:
one read, stamped, and handed to the stream's Reading (client/reading.py), from the answer's first
byte. The request's greenlet is switched to when its stream has ended, failed, or hung up.

A stream over TLS is read in its request's greenlet instead (_follow_here): gevent's socket decrypts
it, and may have to wait to, which a callback of the hub must not.

A request's own timeouts stay with its greenlet (a gevent.Timeout over the whole request): when one
fires while it waits, the watcher is stopped before the request closes its socket.
"""

from __future__ import annotations

import contextlib
import socket
from time import perf_counter

from gevent.hub import Waiter, get_hub
from gevent.ssl import SSLSocket

from loadwatch.client.reading import Reading

BLOCK = 65536  # bytes a read takes: what queued up of one stream while the others were read, at once


class _Followed:
    """A stream being read: its socket, its reading, its watcher, and the greenlet waiting for its end."""

    __slots__ = ("error", "raw", "reading", "waiter", "watcher")

    def __init__(self, reading: Reading) -> None:
        self.reading = reading
        # gevent's socket wraps a non-blocking one: read directly, so a spurious wake-up costs an
        # exception, never a wait (a callback of the hub must not block).
        self.raw: socket.socket = reading.response._sock._sock  # type: ignore[union-attr]
        hub = get_hub()
        self.waiter = Waiter(hub)
        self.watcher = hub.loop.io(self.raw.fileno(), 1)
        self.error: BaseException | None = None


def follow(reading: Reading) -> None:
    """Wait until the stream's answer has ended; raises what ended it otherwise
    (RequestFailed, HungUp, or any other exception, which the request counts as the load generator's
    error), and whatever interrupts the wait (a gevent.Timeout, a kill) after letting the stream go."""
    response = reading.response
    if response._sock is None:
        raise reading.cut("the connection closed")
    if isinstance(response._sock, SSLSocket):
        # TLS: its records are decrypted by gevent's socket, which may wait; a callback of the hub
        # must not. Such a stream is read in its request's greenlet, a wake for each read.
        _follow_here(reading, response._sock)
        return
    followed = _Followed(reading)
    watcher = followed.watcher
    watcher.start(_read, followed)
    try:
        followed.waiter.get()
    except BaseException:  # a timeout, a kill: the stream is let go, and its connection closed
        watcher.stop()
        response.release()
        _caught_up(reading)
        raise
    finally:
        watcher.close()
    error, followed.error = followed.error, None  # no cycle through the error's traceback
    if error is not None:
        # An answer not read to its end: its connection is closed now, so the server sees the client go
        # (a hang-up aborts the request in vLLM), not when the response is collected.
        response.release()
        raise error


def _read(followed: _Followed) -> None:
    """One read of one stream, in the hub, and what it said; its greenlet is switched to once it is over."""
    try:
        data = followed.raw.recv(BLOCK)
    except BlockingIOError:
        return
    except OSError as exc:
        _end(followed, followed.reading.cut(str(exc)))
        return
    try:
        if followed.reading.take(data, perf_counter()):
            _end(followed, None)
    except Exception as exc:
        _end(followed, exc)


def _follow_here(reading: Reading, sock: SSLSocket) -> None:
    """The stream read in this greenlet, to its end."""
    try:
        while True:
            try:
                data = sock.recv(BLOCK)
            except OSError as exc:
                raise reading.cut(str(exc)) from exc
            if reading.take(data, perf_counter()):
                return
    except BaseException:  # as a stream the hub reads: one not read to its end is let go at once
        reading.response.release()
        _caught_up(reading)
        raise


def _caught_up(reading: Reading) -> None:
    """The events of a stream interrupted: a request hung up or timed out keeps its first chunk's time,
    and says how many came. What they say wrong is not the request's end: the interruption is."""
    with contextlib.suppress(Exception):
        reading.catch_up()


def _end(followed: _Followed, error: BaseException | None) -> None:
    followed.watcher.stop()
    followed.error = error
    followed.waiter.switch(None)
