"""One reader per process for every stream in flight: a request's greenlet waits once for its whole
stream, not once per token.

Each token of a stream comes in a TCP segment of its own. Read by the request's greenlet, every token
cost a wake of gevent's loop, a switch into that greenlet, a socket read through gevent and a switch
back: about two thirds of a chunk's CPU at a thousand streams a core (benchmarks/chunk_profile.py).
Here one greenlet owns the sockets of all streams in flight: it waits on one epoll set through gevent's
hub (Linux's; gevent's monkey-patching hides it from `select`, and `selectors` then has no set to wait
on), and on each wake reads every ready socket once, stamps the read,
and hands the bytes to the stream's Reading, which parses them at once. The request's greenlet is
woken when its stream has ended, failed, or hung up.

A request's own timeouts stay with its greenlet (a gevent.Timeout over the whole request): when one
fires while it waits here, its socket leaves the set before the request closes it.
"""

from __future__ import annotations

import os
import socket
from time import perf_counter

import gevent
from gevent.hub import Waiter, get_hub
from gevent.monkey import get_original
from geventhttpclient.response import HTTPParseError, HTTPSocketResponse

from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.client.reading import Reading

epoll = get_original("select", "epoll")
select_in = get_original("select", "EPOLLIN")
BLOCK = 65536  # bytes a read takes: what queued up of one stream while the others were read, at once


class _Followed:
    """A stream the reader follows: its socket, its reading, and the greenlet waiting for its end."""

    __slots__ = ("error", "fd", "live", "raw", "reading", "response", "waiter")

    def __init__(self, response: HTTPSocketResponse, reading: Reading) -> None:
        self.response, self.reading = response, reading
        # gevent's socket wraps a non-blocking one: read directly, a spurious wake-up costs an
        # exception, never a wait of the reader (which would stall every stream in the process).
        self.raw: socket.socket = response._sock._sock  # type: ignore[union-attr]
        self.fd = self.raw.fileno()
        self.waiter = Waiter()
        self.error: BaseException | None = None
        self.live = True  # still in the reader's set


class Reader:
    """The process's streams in flight, read together; `follow` one until its end."""

    def __init__(self) -> None:
        self.pid = os.getpid()  # an epoll set is not shared with a forked child: each process makes its own
        self.hub = get_hub()
        self.epoll = epoll()
        self.watcher = self.hub.loop.io(self.epoll.fileno(), 1)
        self.following: dict[int, _Followed] = {}  # by socket descriptor
        self.running = False

    def follow(self, response: HTTPSocketResponse, reading: Reading) -> None:
        """Wait until the stream's body has ended; raises what ended it otherwise (RequestFailed,
        HungUp), and whatever interrupts the wait (a gevent.Timeout, a kill) after letting it go."""
        if response._sock is None:
            raise RequestFailed(Reason.STREAM_CUT, f"connection closed after {len(reading.arrivals)} chunks")
        followed = _Followed(response, reading)
        self.epoll.register(followed.fd, select_in)
        self.following[followed.fd] = followed
        if not self.running:
            self.running = True
            gevent.spawn(self._run)
        try:
            followed.waiter.get()
        except BaseException:  # a timeout, a kill: the stream is let go, and its connection closed
            if followed.live:
                self._drop(followed)
            response.release()
            raise
        error, followed.error = followed.error, None  # no cycle through the error's traceback
        if error is not None:
            # An answer not read to its end: its connection is closed now, so the server sees the client go
            # (a hang-up aborts the request in vLLM), not when the response is collected.
            response.release()
            raise error

    def _drop(self, followed: _Followed) -> None:
        del self.following[followed.fd]
        followed.live = False
        try:
            self.epoll.unregister(followed.fd)
        except OSError:
            pass  # already closed (a stream that ended gave its socket up): epoll dropped it then

    def _run(self) -> None:
        hub, watcher, poll, following = self.hub, self.watcher, self.epoll.poll, self.following
        try:
            while following:
                hub.wait(watcher)
                for fd, _ in poll(0):
                    followed = following.get(fd)
                    if followed is not None:
                        self._read(followed)
        finally:
            self.running = False

    def _read(self, followed: _Followed) -> None:
        """One read of one stream, and what it said; the stream's greenlet woken once it is over.
        What ends it otherwise goes to that greenlet: RequestFailed, HungUp, or any other exception
        (the request still ends, counted once as the load generator's error)."""
        reading = followed.reading
        try:
            data = followed.raw.recv(BLOCK)
        except BlockingIOError:
            return
        except OSError as exc:
            self._end(followed, RequestFailed(Reason.STREAM_CUT, f"after {len(reading.arrivals)} chunks: {exc}"))
            return
        now = perf_counter()
        try:
            followed.response.feed(data)
            if reading.take(now):
                self._end(followed, None)
            elif not data:
                raise RequestFailed(Reason.STREAM_CUT, f"connection closed after {len(reading.arrivals)} chunks")
        except HTTPParseError as exc:
            self._end(followed, RequestFailed(Reason.STREAM_CUT, f"after {len(reading.arrivals)} chunks: {exc}"))
        except Exception as exc:
            self._end(followed, exc)

    def _end(self, followed: _Followed, error: BaseException | None) -> None:
        # Out of the set before anything else runs: the socket goes back to its pool (or is closed) as
        # the stream ends, and its descriptor may be another stream's by the next wake.
        if followed.live:
            self._drop(followed)
        followed.error = error
        self.hub.loop.run_callback(followed.waiter.switch, None)


_reader: Reader | None = None


def reader() -> Reader:
    """This process's reader (a forked worker makes its own)."""
    global _reader
    if _reader is None or _reader.pid != os.getpid():
        _reader = Reader()
    return _reader
