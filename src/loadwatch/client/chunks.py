"""Reading one streamed chunk of the OpenAI chat or completions API."""

from __future__ import annotations

import json
from dataclasses import dataclass

from loadwatch.client.failures import Reason, RequestFailed


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str | None  # the generated text it carries, if any
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def has_text(self) -> bool:
        return bool(self.text)


def _text_of(choice: dict, endpoint: str) -> str | None:
    if endpoint == "completions":
        text = choice.get("text")
        return _string(text, "text")
    delta = choice.get("delta")
    if delta is None:
        return None
    if not isinstance(delta, dict):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"delta is a {type(delta).__name__}, not an object")
    # Reasoning models stream thoughts before the answer; vLLM has named the field both ways.
    for field in ("content", "reasoning_content", "reasoning"):
        if text := _string(delta.get(field), field):
            return text
    return _tool_arguments(delta.get("tool_calls"))


def _tool_arguments(calls: object) -> str | None:
    """The arguments a tool-call delta streams: an agent's model output, as text is (its first
    chunk often names the function with empty arguments: that is not yet output)."""
    if calls is None:
        return None
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise RequestFailed(Reason.MALFORMED_CHUNK, "tool_calls is not a list of objects")
    parts = []
    for call in calls:
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise RequestFailed(Reason.MALFORMED_CHUNK, "a tool call's function is not an object")
        parts.append(_string(function.get("arguments"), "function.arguments") or "")
    return "".join(parts) or None


def _string(value: object, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise RequestFailed(Reason.MALFORMED_CHUNK, f"{name} is a {type(value).__name__}, not a string")


def _count(usage: dict, name: str) -> int | None:
    value = usage.get(name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise RequestFailed(Reason.MALFORMED_CHUNK, f"usage.{name} is {value!r}, not a count")


def parse_chunk(data: str, endpoint: str) -> Chunk:
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"not JSON: {data[:120]!r}") from exc
    if not isinstance(obj, dict):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"not a JSON object: {data[:120]!r}")
    error = obj.get("error")
    if error is not None:  # `"error": null` is no error
        message = error.get("message", error) if isinstance(error, dict) else error
        raise RequestFailed(Reason.STREAM_ERROR, str(message)[:300])
    choices = obj.get("choices")
    usage = obj.get("usage")
    if not isinstance(choices, list) or (choices and not isinstance(choices[0], dict)):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"no choices list: {data[:120]!r}")
    text = _text_of(choices[0], endpoint) if choices else None
    if isinstance(usage, dict):
        return Chunk(text, _count(usage, "prompt_tokens"), _count(usage, "completion_tokens"))
    if usage is not None:
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"usage is a {type(usage).__name__}, not an object")
    return Chunk(text)
