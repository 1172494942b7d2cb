"""grafana-client (for `loadwatch annotate`) brings niquests and urllib3-future, which takes over the
`urllib3` package that requests and Locust use. The stream reader must not care: it is
geventhttpclient, and its timing stays within the fidelity limits with that stack loaded."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from loadwatch.client.stream import Streamer
from loadwatch.settings import LoadSettings
from tests.conftest import REPO
from tests.integration.test_fidelity import assert_faithful

pytestmark = pytest.mark.timing  # judged to the millisecond: run alone, not beside other tests


def test_the_stream_reader_is_not_built_on_urllib3_whichever_owns_that_package():
    import urllib3

    # Which of the two owns `urllib3` depends on install order; the stream reader uses neither.
    owner = "urllib3-future" if urllib3.__version__ == metadata.version("urllib3-future") else "urllib3"
    print(f"`urllib3` is {owner} {urllib3.__version__}")
    streamer = Streamer("http://127.0.0.1:1", None, 5.0, LoadSettings().max_line_bytes)
    assert type(streamer._http()).__module__.startswith("geventhttpclient")
    streamer.close()


def test_streaming_timing_is_intact_with_grafana_client_loaded(fake_server, tmp_path):
    server = fake_server("--ttft", "0.1", "--itl", "0.02", "--tokens", "20")
    results = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "tests" / "integration" / "locustfiles" /
                                                   "with_grafana_client.py"),
         "-H", server.url, "--headless", "-u", "16", "-r", "16", "-t", "8s", "--metrics-port", "0",
         "--stop-timeout", "5", "--results-json", str(results)],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert_faithful(results, server, at_least=100)
