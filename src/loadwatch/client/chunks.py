"""Reading one streamed chunk of the OpenAI chat or completions API, or one event of the Responses API."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import orjson

from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.metrics.timing import EngineAccount


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of one tool call: its first names the call (id, function), the rest stream arguments."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None = None  # usage.prompt_tokens_details (vLLM --enable-prompt-tokens-details)
    reasoning_tokens: int | None = None  # usage.completion_tokens_details, where the server reports it


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and a chunk is made per
# streamed chunk (about 2 us of the load generator's 38 a chunk at a thousand streams, py-spy says).
@dataclass(slots=True)
class Chunk:
    content: str | None = None  # answer text (the completions API's text)
    reasoning: str | None = None  # a reasoning model's thoughts before its answer
    tool_calls: tuple[ToolCallDelta, ...] = ()
    usage: Usage | None = None
    engine: EngineAccount | None = None  # the usage chunk's `metrics`, where vLLM sends them
    # The usage chunk's system_fingerprint: with --fingerprint-mode custom, the name of the replica that
    # served the request, whatever router stood between (docs/guides/fleet.md).
    fingerprint: str | None = None
    final: bool = False  # the stream's last word: the Responses API ends with an event, not [DONE]
    finished: bool = False  # it carries a finish_reason: the generation is over, whatever follows

    @property
    def arguments(self) -> str:
        return "".join(call.arguments for call in self.tool_calls)

    @property
    def has_answer(self) -> bool:
        """Answer output: text or tool-call arguments (a first chunk that only names the function
        is not yet output)."""
        return bool(self.content) or (bool(self.tool_calls) and bool(self.arguments))

    @property
    def has_text(self) -> bool:
        """Generated output of any kind: TTFT ends at the first such chunk."""
        return bool(self.content) or bool(self.reasoning) or self.has_answer


def _delta(choice: dict, endpoint: str) -> Chunk:
    if endpoint == "completions":
        return Chunk(content=_string(choice.get("text"), "text"))
    delta = choice.get("delta")
    if delta is None:
        return Chunk()
    if not isinstance(delta, dict):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"delta is a {type(delta).__name__}, not an object")
    # vLLM has named the reasoning field both ways.
    reasoning = _string(delta.get("reasoning_content"), "reasoning_content") or \
        _string(delta.get("reasoning"), "reasoning")
    calls = delta.get("tool_calls")
    return Chunk(_string(delta.get("content"), "content"), reasoning, () if calls is None else _tool_calls(calls))


def _tool_calls(calls: object) -> tuple[ToolCallDelta, ...]:
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise RequestFailed(Reason.MALFORMED_CHUNK, "tool_calls is not a list of objects")
    out = []
    for position, call in enumerate(calls):
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise RequestFailed(Reason.MALFORMED_CHUNK, "a tool call's function is not an object")
        index = call.get("index", position)
        if not isinstance(index, int):
            raise RequestFailed(Reason.MALFORMED_CHUNK, f"a tool call's index is {index!r}")
        out.append(ToolCallDelta(index, _string(call.get("id"), "tool_calls.id"),
                                 _string(function.get("name"), "function.name"),
                                 _string(function.get("arguments"), "function.arguments") or ""))
    return tuple(out)


def _string(value: object, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise RequestFailed(Reason.MALFORMED_CHUNK, f"{name} is a {type(value).__name__}, not a string")


def _count(usage: dict, name: str, where: str = "usage") -> int | None:
    value = usage.get(name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise RequestFailed(Reason.MALFORMED_CHUNK, f"{where}.{name} is {value!r}, not a count")


def _details(usage: dict, field: str, name: str) -> int | None:
    details = usage.get(field)
    return _count(details, name, f"usage.{field}") if isinstance(details, dict) else None


def _usage(usage: dict) -> Usage:
    return Usage(_count(usage, "prompt_tokens"), _count(usage, "completion_tokens"),
                 _details(usage, "prompt_tokens_details", "cached_tokens"),
                 _details(usage, "completion_tokens_details", "reasoning_tokens"))


def _preview(data: bytes | str) -> str:
    """The start of a payload, for an error message."""
    return repr(data[:120].decode("utf-8", "replace") if isinstance(data, bytes) else data[:120])


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: object = None  # present: read by _parse


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    text: str | None = None  # the completions API's
    finish_reason: object = None


class _Token(msgspec.Struct):
    """A chat or completions chunk as a server that follows the API writes each token's. No more
    lenient than _parse on what it reads: what it refuses, _parse reads again and says what is wrong
    in words, and a chunk with an error, usage or tool calls (a few a request) is _parse's."""

    choices: list[_Choice]
    error: object = None
    usage: object = None


_TOKEN = msgspec.json.Decoder(_Token)


def parse_chunk(data: bytes | str, endpoint: str) -> Chunk:
    """One event's payload (bytes as the stream's decoder gives them, or text), read as a chunk.

    A token's chunk of the chat or completions API is decoded by msgspec into the few fields the
    metrics read, checked as it is decoded, in C: a vLLM chunk is read in less than half the time
    that orjson's whole object and the checks of _parse in Python take (1.0 against 2.4 us here),
    on the per-chunk path. msgspec skips the fields it is not asked for unchecked, so a payload that
    is not ASCII is read by it only once it is known to be UTF-8, as JSON must be; a number in such a
    field past a double's range, which JSON's grammar allows and orjson refuses, is passed over."""
    if endpoint != "responses" and (data.isascii() or _utf8(data)):
        try:
            token = _TOKEN.decode(data)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # the last two: its own, uncaught
            token = None
        if token is not None and token.error is None and token.usage is None:
            if not token.choices:
                return Chunk()
            choice = token.choices[0]
            delta = choice.delta
            if endpoint == "completions":
                chunk = Chunk(content=choice.text)
            elif delta is None:
                chunk = Chunk()
            elif delta.tool_calls is None:
                chunk = Chunk(delta.content, delta.reasoning_content or delta.reasoning)
            else:
                return _parse(data, endpoint)
            chunk.finished = choice.finish_reason is not None
            return chunk
    return _parse(data, endpoint)


def _utf8(data: bytes | str) -> bool:
    """Bytes that decode as UTF-8 (text that is not ASCII is _parse's: it may hold a lone surrogate)."""
    if isinstance(data, str):
        return False
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _parse(data: bytes | str, endpoint: str) -> Chunk:
    try:
        obj = orjson.loads(data)  # the per-chunk path's largest single cost with the standard library's json
    except orjson.JSONDecodeError as exc:  # invalid UTF-8 too
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"not JSON ({exc}): {_preview(data)}") from exc
    if not isinstance(obj, dict):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"not a JSON object: {_preview(data)}")
    if endpoint == "responses":
        return _response_event(obj, data)
    error = obj.get("error")
    if error is not None:  # `"error": null` is no error
        message = error.get("message", error) if isinstance(error, dict) else error
        raise RequestFailed(Reason.STREAM_ERROR, str(message)[:300])
    choices = obj.get("choices")
    if not isinstance(choices, list) or (choices and not isinstance(choices[0], dict)):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"no choices list: {_preview(data)}")
    if choices:
        choice = choices[0]
        chunk = _delta(choice, endpoint)
        chunk.finished = choice.get("finish_reason") is not None
    else:
        chunk = Chunk()
    usage = obj.get("usage")
    if usage is None:
        return chunk
    if not isinstance(usage, dict):
        raise RequestFailed(Reason.MALFORMED_CHUNK, f"usage is a {type(usage).__name__}, not an object")
    fingerprint = obj.get("system_fingerprint")
    chunk.usage, chunk.engine = _usage(usage), _engine(obj.get("metrics"))
    chunk.fingerprint = fingerprint if isinstance(fingerprint, str) else None
    return chunk


def _seconds(metrics: dict, name: str) -> float | None:
    value = metrics.get(name)
    return value / 1000 if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _engine(metrics: object) -> EngineAccount | None:
    """The engine's account, field by field: a field it leaves out or garbles is None, and the
    request stands (the account adds to what the client measured, it never decides it)."""
    if not isinstance(metrics, dict):
        return None
    spec = metrics.get("speculative_decoding")
    spec = spec if isinstance(spec, dict) else {}
    length, rate = spec.get("mean_acceptance_length"), spec.get("draft_acceptance_rate")
    return EngineAccount(_seconds(metrics, "queue_time_ms"), _seconds(metrics, "time_to_first_token_ms"),
                         _seconds(metrics, "generation_time_ms"), _seconds(metrics, "mean_itl_ms"),
                         float(length) if isinstance(length, int | float) else None,
                         float(rate) if isinstance(rate, int | float) else None)


def _response_event(event: dict, data: bytes | str) -> Chunk:
    """One event of the Responses API, by its `type`: text, reasoning (or its summary) deltas and a function call's
    arguments are output (its name, in the item that opens it, is not yet); `response.completed` (or
    `.incomplete`, at max_output_tokens) ends the stream with the usage and vLLM's account; the
    others (created, in_progress, parts opened and done) carry nothing the metrics need."""
    kind = event.get("type")
    if kind == "response.output_text.delta":
        return Chunk(content=_string(event.get("delta"), "delta"))
    # OpenAI's reasoning models stream a summary of their reasoning, not the reasoning itself: the
    # first output the client sees all the same.
    if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
        return Chunk(reasoning=_string(event.get("delta"), "delta"))
    index = event.get("output_index", 0)
    index = index if isinstance(index, int) else 0
    if kind == "response.function_call_arguments.delta":
        return Chunk(tool_calls=(ToolCallDelta(index, None, None, _string(event.get("delta"), "delta") or ""),))
    if kind == "response.output_item.added":
        item = event.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            return Chunk(tool_calls=(ToolCallDelta(index, _string(item.get("call_id"), "item.call_id"),
                                                   _string(item.get("name"), "item.name"), ""),))
        return Chunk()
    if kind in ("response.completed", "response.incomplete"):
        response = event.get("response")
        usage = response.get("usage") if isinstance(response, dict) else None
        if not isinstance(response, dict) or not isinstance(usage, dict):
            raise RequestFailed(Reason.MALFORMED_CHUNK, f"{kind} carries no usage: {_preview(data)}")
        return Chunk(usage=Usage(_count(usage, "input_tokens"), _count(usage, "output_tokens"),
                                 _details(usage, "input_tokens_details", "cached_tokens"),
                                 _details(usage, "output_tokens_details", "reasoning_tokens")),
                     engine=_engine(response.get("metrics")), final=True)
    if kind in ("error", "response.failed"):
        response = event.get("response")
        error = response.get("error") if isinstance(response, dict) else event
        message = error.get("message", error) if isinstance(error, dict) else error
        raise RequestFailed(Reason.STREAM_ERROR, str(message)[:300])
    return Chunk()
