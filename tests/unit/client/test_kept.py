"""A kept connection is judged by its state, whatever its descriptor's number: geventhttpclient's own
check (select) fails past descriptor 1023 and counts the connection dead, so that a process with a
thousand streams reconnected for every request of those past it. Socket pairs moved to a descriptor
past 1023: no process."""

from __future__ import annotations

import fcntl
import resource
import socket

import pytest
from geventhttpclient import HTTPClient
from geventhttpclient.connectionpool import ConnectionPool

from loadwatch.client.kept import alive, keeping

PAST_SELECT = 1024  # select() takes descriptors below this


@pytest.fixture
def high_pair():
    """A connected pair whose first end's descriptor is past select()'s reach."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= PAST_SELECT + 16:
        pytest.skip(f"this process may open no descriptor past {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, PAST_SELECT + 16), hard))  # as Locust raises it
    ours, theirs = socket.socketpair()
    high = socket.socket(fileno=fcntl.fcntl(ours.fileno(), fcntl.F_DUPFD, PAST_SELECT))  # the lowest free one
    ours.close()
    yield high, theirs
    high.close()
    theirs.close()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_idle_connection_past_descriptor_1023_is_alive_where_geventhttpclients_check_counts_it_dead(high_pair):
    high, _ = high_pair
    assert alive(high)
    assert not ConnectionPool._is_socket_alive(None, high)  # type: ignore[arg-type]  # select: out of range


def test_a_connection_its_server_wrote_to_or_closed_is_not_taken_again(high_pair):
    high, theirs = high_pair
    theirs.send(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
    assert not alive(high)
    high.recv(100)
    assert alive(high)
    theirs.close()
    assert not alive(high)
    high.close()
    assert not alive(high) and not alive(None)


def test_a_client_keeping_its_connections_judges_them_by_their_state():
    client = keeping(HTTPClient("127.0.0.1", 9))
    assert client._connection_pool._is_socket_alive is alive
