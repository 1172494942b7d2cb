"""Reading one streamed chunk of the OpenAI chat or completions API."""

from __future__ import annotations

import json
from dataclasses import dataclass

from loadwatch.client.failures import Reason, RequestFailed


@dataclass(frozen=True, slots=True)
class Chunk:
    has_text: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def _text_of(choice: dict, endpoint: str) -> str | None:
    if endpoint == "completions":
        return choice.get("text")
    delta = choice.get("delta") or {}
    # Reasoning models stream thoughts before the answer; vLLM has named the field both ways.
    return delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")


def parse_chunk(data: str, endpoint: str) -> Chunk:
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"not JSON: {data[:120]!r}") from exc
    if not isinstance(obj, dict):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"not a JSON object: {data[:120]!r}")
    if "error" in obj:
        error = obj["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise RequestFailed(Reason.STREAM_ERROR, str(message)[:300])
    choices = obj.get("choices")
    usage = obj.get("usage")
    if not isinstance(choices, list) or (choices and not isinstance(choices[0], dict)):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"no choices list: {data[:120]!r}")
    has_text = bool(choices) and bool(_text_of(choices[0], endpoint))
    if isinstance(usage, dict):
        return Chunk(has_text, usage.get("prompt_tokens"), usage.get("completion_tokens"))
    return Chunk(has_text)
