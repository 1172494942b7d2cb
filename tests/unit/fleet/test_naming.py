"""The name a replica answers with (fleet/naming.py): the fingerprint of its one-token completion,
read as the load generator reads a stream; a replica that names itself nowhere is refused with the
flags that make it."""

from __future__ import annotations

import io
import json

import pytest

from loadwatch.fleet import naming
from loadwatch.fleet.routers import RouterError


def replica(monkeypatch, *chunks: dict) -> list[str]:
    """A replica serving `model` whose completion streams `chunks`; the URLs it was asked at."""
    asked: list[str] = []
    stream = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"

    def urlopen(request, timeout):
        asked.append(request.full_url)
        return io.BytesIO(json.dumps({"data": [{"id": "model"}]}).encode()
                          if request.full_url.endswith("/v1/models") else stream)

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY_FILE", raising=False)
    monkeypatch.setattr(naming.loopback, "urlopen", urlopen)
    return asked


def test_a_replica_is_named_by_the_last_fingerprint_it_answers_with(monkeypatch):
    asked = replica(monkeypatch, {"choices": [{"text": "H"}], "system_fingerprint": None},
                    {"choices": [], "usage": {"completion_tokens": 1}, "system_fingerprint": "vllm-abc"})
    assert naming.answered_name("http://10.0.0.5:8000/") == "vllm-abc"
    assert asked == ["http://10.0.0.5:8000/v1/models", "http://10.0.0.5:8000/v1/completions"]


def test_a_replica_without_a_fingerprint_is_told_the_flags_that_give_one(monkeypatch):
    replica(monkeypatch, {"choices": [{"text": "H"}], "usage": {"completion_tokens": 1}})
    with pytest.raises(RouterError, match="--fingerprint-mode custom --fingerprint-value NAME"):
        naming.answered_name("http://10.0.0.5:8000")


def test_a_replica_that_does_not_answer_is_not_named(monkeypatch):
    def down(request, timeout):
        raise ConnectionRefusedError(111, "Connection refused")
    monkeypatch.setattr(naming.loopback, "urlopen", down)
    with pytest.raises(RouterError, match="did not answer a one-token completion .*Connection refused"):
        naming.answered_name("http://10.0.0.5:8000")
