"""A user's connection is kept from one request to the next in a process with more than a thousand
sockets open, as a load generator of a thousand streams is: its descriptor is past 1023, where
geventhttpclient's own check of a kept connection (select) fails and counts it dead."""

from __future__ import annotations

import os
import resource

import pytest

from loadwatch.client.stream import Streamer
from loadwatch.settings import LoadSettings

PAYLOAD = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 5,
           "stream_options": {"include_usage": True}}


def test_a_users_connection_past_descriptor_1023_carries_all_its_requests(fake_server):
    server = fake_server("--ttft", "0.01", "--itl", "0.005", "--tokens", "5")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"this process may open no more than {hard} descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))  # as Locust raises it
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # the other streams' sockets
    streamer = Streamer(server.url, None, 10.0, LoadSettings().max_line_bytes)
    try:
        results = [streamer.stream("chat", PAYLOAD) for _ in range(3)]
        kept = streamer._http()._connection_pool._socket_queue.peek()
        assert kept.fileno() > 1023
    finally:
        streamer.close()
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert all(result.failure is None and len(result.timing.content_arrivals) == 5 for result in results)
    assert server.stats()["connections"] == 2  # the user's, and the one asking for the stats
