"""Whether a kept connection can carry the next request, whatever its descriptor's number.

geventhttpclient (2.6.1) checks a connection it takes from its pool with select(), which takes no
descriptor past 1023: there its check fails, and it counts the connection dead, closes it and
connects again. Past about a thousand open sockets, a load generator reconnected for every request
of those streams: each of their TTFTs carried a TCP connect, and each request its CPU (at 1,024
streams on one process, 588 of 1,100 kept connections were found dead at every request). poll
takes any descriptor.
"""

from __future__ import annotations

import select

from gevent.monkey import get_original
from geventhttpclient import HTTPClient

_poll = get_original("select", "poll")  # the system's: gevent's own would wait in its hub


def alive(sock: object) -> bool:
    """An idle kept connection has nothing to read: readable, its server closed it (or sent what no
    request asked for), and it is not taken again; as geventhttpclient judges it."""
    if sock is None:
        return False
    try:
        fd = sock.fileno()  # type: ignore[attr-defined]
        if fd < 0:
            return False
        poller = _poll()
        poller.register(fd, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False


def keeping(client: HTTPClient) -> HTTPClient:
    """The client, its pool judging a kept connection by `alive`."""
    client._connection_pool._is_socket_alive = alive  # type: ignore[method-assign]
    return client
