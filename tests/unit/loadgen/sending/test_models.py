"""The server's model: looked up until it answers, never a failure kept (finding 9 of the cluster review)."""

from __future__ import annotations

import pytest

from loadwatch.client.failures import RequestFailed
from loadwatch.loadgen.sending import models


class Server:
    """A streamer whose /v1/models fails until the model is loaded."""

    def __init__(self, origin: str) -> None:
        self.origin, self.loaded, self.asked = origin, False, 0

    def get_json(self, path: str) -> dict:
        self.asked += 1
        if not self.loaded:
            raise RequestFailed("connection", "connection refused")
        return {"data": [{"id": "qwen"}]}


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(models, "_resolved", {})
    monkeypatch.setattr(models, "_failed_at", {})


def test_a_failed_lookup_is_asked_again_and_the_answer_then_kept():
    server = Server("http://vllm:8000")
    assert models.resolve_model(server) is None and models.resolve_model(server) is None
    assert server.asked == 2, "a failure is not kept: each caller asks again"
    server.loaded = True
    assert models.resolve_model(server) == "qwen" and models.resolve_model(server) == "qwen"
    assert server.asked == 3, "an answer is kept"
