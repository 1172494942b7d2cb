"""The one answer of an embeddings or rerank request: checked, and its prompt tokens read.

A 200 that does not embed every input, or rank every document, measured nothing the user asked
for: it fails the request (`malformed_answer`), so a server that answers the wrong thing cannot
pass for a fast one.
"""

from __future__ import annotations

import orjson

from loadwatch.client.endpoints import Endpoint
from loadwatch.client.failures import Reason, RequestFailed


def inputs_of(endpoint: Endpoint, payload: dict) -> int:
    """How many results the request asks for: texts to embed, or documents to rank."""
    sent = payload.get("input") if endpoint == "embeddings" else payload.get("documents")
    return len(sent) if isinstance(sent, list) else 1


def prompt_tokens(endpoint: Endpoint, body: bytes, inputs: int) -> int | None:
    """The answer's usage.prompt_tokens (None where the server gave none); RequestFailed where the
    answer does not have one result per input."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RequestFailed(Reason.MALFORMED_ANSWER, f"the {endpoint} answer is not JSON: {exc}") from exc
    if not isinstance(answer, dict):
        raise RequestFailed(Reason.MALFORMED_ANSWER, f"the {endpoint} answer is not a JSON object")
    key = "data" if endpoint == "embeddings" else "results"
    results = answer.get(key)
    if not isinstance(results, list) or len(results) != inputs:
        got = len(results) if isinstance(results, list) else "no"
        raise RequestFailed(Reason.MALFORMED_ANSWER, f"the {endpoint} answer has {got} {key} for {inputs} inputs")
    usage = answer.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) else None
