"""A server behind https: its streams are read through TLS (the hub's raw reads are for plain
connections), timed as a plain stream is, and the certificate is checked as Python checks any,
against the trust store SSL_CERT_FILE names."""

from __future__ import annotations

import json
import subprocess

import pytest

from loadwatch.client.failures import Reason
from loadwatch.client.stream import Streamer
from loadwatch.settings import LoadSettings
from tests.conftest import headless_run

PAYLOAD = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "stream": True,
           "stream_options": {"include_usage": True}}


@pytest.fixture
def certificate(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def test_a_stream_over_https_is_read_and_timed(fake_server, certificate, monkeypatch):
    cert, key = certificate
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", "20", "--tls", str(cert), str(key))
    url = f"https://127.0.0.1:{server.port}"
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts it as it would a CA's
    streamer = Streamer(url, None, 10.0, LoadSettings().max_line_bytes)
    try:
        results = [streamer.stream("chat", PAYLOAD) for _ in range(3)]  # the second and third on the kept connection
    finally:
        streamer.close()
    for result in results:
        assert result.failure is None, result.failure
        timing = result.timing
        assert len(timing.content_arrivals) == 20 and timing.completion_tokens == 20
        gaps = [b - a for a, b in zip(timing.content_arrivals, timing.content_arrivals[1:], strict=False)]
        assert sorted(gaps)[len(gaps) // 2] > 0.005  # a chunk a read, as the server wrote them


def test_an_untrusted_certificate_fails_the_request_as_a_connection_failure(fake_server, certificate):
    cert, key = certificate
    server = fake_server("--tls", str(cert), str(key))
    streamer = Streamer(f"https://127.0.0.1:{server.port}", None, 10.0, LoadSettings().max_line_bytes)
    try:
        result = streamer.stream("chat", PAYLOAD)
    finally:
        streamer.close()
    assert result.failure is not None and result.failure.reason == Reason.CONNECTION
    assert "CERTIFICATE_VERIFY_FAILED" in str(result.failure)


def test_a_headless_run_against_https_completes_every_request(fake_server, certificate, monkeypatch, tmp_path):
    cert, key = certificate
    server = fake_server("--tls", str(cert), str(key))
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the run's processes inherit it, as a user's shell passes it
    results = tmp_path / "results.json"
    run = headless_run(f"https://127.0.0.1:{server.port}", results, "-u", "4", "-r", "4", "--num-requests", "20")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    data = json.loads(results.read_text())
    assert (data["completed"], data["failed"]) == (20, 0), data["failures"]
    assert data["total_output_tokens"] == 20 * 20  # the test server's 20 tokens a request, each read
