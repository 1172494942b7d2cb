"""The OpenAI-compatible APIs loadwatch sends to: the option's choices and their URL paths.

Chat, completions and responses stream their output, token by token; embeddings and rerank answer
once, with no first token, so their requests are timed from the send to the whole answer.
"""

from __future__ import annotations

from typing import Literal

Endpoint = Literal["chat", "completions", "responses", "embeddings", "rerank"]
PATHS: dict[Endpoint, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions",
                              "responses": "/v1/responses", "embeddings": "/v1/embeddings",
                              # vLLM's own path: it warns on every start that /v1/rerank is not OpenAI's
                              "rerank": "/rerank"}
POOLING: frozenset[Endpoint] = frozenset({"embeddings", "rerank"})


def streams(endpoint: Endpoint) -> bool:
    """Whether the endpoint streams generated tokens (and so has a TTFT, ITL and TPOT)."""
    return endpoint not in POOLING
