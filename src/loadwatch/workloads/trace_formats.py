"""Trace files as others write them, each read into the replay's entries (workloads/trace.py).

A format is one class in FORMATS: its name (for --trace-format), how it knows its own files, and
how it reads one. Each names the line, row or request and the field of what it cannot read.

- mooncake: JSON Lines of `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
- azure: Azure's public LLM inference traces, CSV of `TIMESTAMP,ContextTokens,GeneratedTokens`
  (2023 and 2024 releases: a date and time, its fraction to 7 digits, or seconds).
- weka: WEKA's agentic traces (kv-cache-tester, cc-traces-weka): a session of `requests`, each at
  `t` seconds with `in`/`out` tokens and `hash_ids` of the file's `block_size`; a subagent's own
  requests run from its `t`, their hash ids in a scope of their own (`hash_id_scope: local`).
- otel: OpenTelemetry GenAI spans, as inference-perf exports them (`spans`) or as OTLP/JSON
  (`resourceSpans`): each span with `gen_ai.input.messages` is a request of those messages at its
  start time. Dependencies between spans are kept as the recorded times placed them.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.files import json_lines, read_json, read_text

CHARS_PER_TOKEN = 4  # a span that gives no token counts: its text's length, as vLLM's tokenizers roughly go


@dataclass(frozen=True)
class Entry:
    timestamp: float  # ms from any origin: the replay runs from the first
    input_length: int  # tokens
    output_length: int
    hash_ids: tuple[int, ...] = ()
    where: str = ""  # the line, row, request or span of the file it came from, to name it
    messages: tuple[dict, ...] | None = None  # the request's own messages (otel); None: made of blocks


@dataclass(frozen=True)
class TraceFile:
    path: Path
    entries: list[Entry]  # in time order
    format: str
    block_tokens: int | None = None  # the file's own block size; None: --trace-block-tokens


def _count(item: dict, name: str, where: str, least: int) -> int:
    value = item.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise DatasetError(f"{where}: {name} must be an integer of at least {least}")
    return value


def _time(item: dict, name: str, where: str, unit: str) -> float:
    value = item.get(name)
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise DatasetError(f"{where}: {name} must be a number of {unit}, 0 or more")
    return float(value)


def _hash_ids(item: dict, where: str, name: str = "hash_ids") -> tuple[int, ...]:
    ids = item.get(name, [])
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise DatasetError(f"{where}: {name} must be a list of integers")
    return tuple(ids)


class TraceFormat:
    name = ""
    summary = ""

    def knows(self, text: str) -> bool:
        """Whether `text` (the file, its leading blanks stripped) is in this format."""
        raise NotImplementedError

    def read(self, path: Path, text: str) -> TraceFile:
        raise NotImplementedError


class Mooncake(TraceFormat):
    name, summary = "mooncake", "JSON Lines of timestamp (ms), input_length, output_length, hash_ids"

    def knows(self, text: str) -> bool:
        return text.startswith("{") and '"timestamp"' in text.split("\n", 1)[0]

    def read(self, path: Path, text: str) -> TraceFile:
        entries = []
        for where, item in json_lines(path, "timestamp, input_length, output_length and hash_ids"):
            entries.append(Entry(_time(item, "timestamp", where, "milliseconds"),
                                 _count(item, "input_length", where, 1), _count(item, "output_length", where, 1),
                                 _hash_ids(item, where), where.removeprefix(f"{path} ")))
        return TraceFile(path, entries, self.name)


# Azure's 2023 traces write 7 digits of fraction, more than datetime reads.
_FRACTION = re.compile(r"(\.\d{6})\d+")


def _when(value: str, where: str) -> float:
    """A TIMESTAMP as seconds: a date and time (its zone, if any, kept) or a number of seconds."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(_FRACTION.sub(r"\1", value.strip())).timestamp()
    except ValueError:
        raise DatasetError(f"{where}: TIMESTAMP must be a date and time (2023-11-16 18:15:46.68) or seconds, "
                           f"not {value[:40]!r}") from None


class Azure(TraceFormat):
    name, summary = "azure", "Azure's LLM inference traces: CSV of TIMESTAMP, ContextTokens, GeneratedTokens"
    columns = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")

    def knows(self, text: str) -> bool:
        return text.split("\n", 1)[0].strip().upper().startswith("TIMESTAMP,")

    def read(self, path: Path, text: str) -> TraceFile:
        rows = csv.DictReader(io.StringIO(text))
        missing = [c for c in self.columns if c not in (rows.fieldnames or [])]
        if missing:
            raise DatasetError(f"{path} row 1: the header lacks {', '.join(missing)} (an Azure trace has "
                               f"{','.join(self.columns)})")
        entries = []
        for number, row in enumerate(rows, start=2):
            where = f"{path} row {number}"
            counts = []
            for column in self.columns[1:]:
                try:
                    counts.append(int(row[column] or ""))
                except ValueError:
                    raise DatasetError(f"{where}: {column} must be an integer, not {row[column]!r}") from None
            if counts[0] < 1 or counts[1] < 1:
                raise DatasetError(f"{where}: ContextTokens and GeneratedTokens must be at least 1")
            when = _when(row["TIMESTAMP"] or "", where)
            entries.append(Entry(when * 1000, counts[0], counts[1], (), f"row {number}"))
        return TraceFile(path, entries, self.name)


class Weka(TraceFormat):
    name, summary = "weka", "WEKA's agentic traces: requests at t seconds with in, out and hash_ids, subagents"

    def knows(self, text: str) -> bool:
        return text.startswith("{") and '"requests"' in text and '"block_size"' in text

    def read(self, path: Path, text: str) -> TraceFile:
        data = _json(path, text)
        block = data.get("block_size")
        if not isinstance(block, int) or isinstance(block, bool) or block < 1:
            raise DatasetError(f"{path}: block_size must be an integer of at least 1")
        requests = data.get("requests")
        if not isinstance(requests, list):
            raise DatasetError(f"{path}: requests must be a list")
        entries = list(self._entries(path, requests, 0.0, 0, "request"))
        return TraceFile(path, entries, self.name, block)

    def _entries(self, path: Path, requests: list, start: float, scope: int, label: str) -> Iterator[Entry]:
        agents = 0
        for number, item in enumerate(requests, start=1):
            where = f"{path} {label} {number}"
            if not isinstance(item, dict):
                raise DatasetError(f"{where}: expected an object")
            t = _time(item, "t", where, "seconds")
            if item.get("type") == "subagent":
                agents += 1
                nested = item.get("requests")
                if not isinstance(nested, list):
                    raise DatasetError(f"{where}: a subagent's requests must be a list")
                # Its hash ids count from 1 again: a scope of its own, above every id of its parent's.
                yield from self._entries(path, nested, start + t, (scope << 8) + agents, f"{label} {number} request")
                continue
            ids = tuple((scope << 40) + h for h in _hash_ids(item, where))
            yield Entry((start + t) * 1000, _count(item, "in", where, 1), _count(item, "out", where, 1), ids,
                        f"{label} {number}")


def _json(path: Path, text: str) -> dict:
    data = read_json(path, text)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object")
    return data


def _otlp_value(value: object) -> object:
    """An OTLP/JSON AnyValue as the plain value."""
    if not isinstance(value, dict):
        return None
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    if "intValue" in value:
        return int(value["intValue"])  # a string in OTLP/JSON
    return None


def _otlp_spans(data: dict) -> list[dict]:
    """OTLP/JSON's resourceSpans as inference-perf's plain spans."""
    spans = []
    for resource in data.get("resourceSpans") or []:
        for scope in (resource or {}).get("scopeSpans") or []:
            for span in (scope or {}).get("spans") or []:
                if not isinstance(span, dict):
                    continue
                attributes = {a.get("key"): _otlp_value(a.get("value")) for a in span.get("attributes") or []
                              if isinstance(a, dict)}
                start = str(span.get("startTimeUnixNano") or "")  # a string in OTLP/JSON, as 64-bit integers are
                spans.append({"span_id": span.get("spanId"), "attributes": attributes,
                              "start_seconds": int(start) / 1e9 if start.isdigit() else None})
    return spans


def _text(content: object) -> str | None:
    """A message's content: text, or the text of its parts (OTel GenAI's `parts` or OpenAI's)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("content", p.get("text")) for p in content if isinstance(p, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return None


class OTel(TraceFormat):
    name, summary = "otel", "OpenTelemetry GenAI spans (inference-perf's or OTLP/JSON), replayed by their messages"
    input_tokens = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
    output_tokens = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "gen_ai.request.max_tokens")

    def knows(self, text: str) -> bool:
        return text.startswith("{") and ('"spans"' in text or '"resourceSpans"' in text)

    def read(self, path: Path, text: str) -> TraceFile:
        data = _json(path, text)
        spans = data.get("spans") if "spans" in data else _otlp_spans(data)
        if not isinstance(spans, list):
            raise DatasetError(f"{path}: spans must be a list")
        entries = []
        for number, span in enumerate(spans, start=1):
            where = f"{path} span {number}"
            attributes = span.get("attributes") if isinstance(span, dict) else None
            if not isinstance(attributes, dict) or "gen_ai.input.messages" not in attributes:
                continue  # a tool's span, an agent's: not a model request
            where = f"{path} span {number} ({span.get('span_id')})"
            messages = self._messages(attributes["gen_ai.input.messages"], where)
            start = span.get("start_seconds")
            if start is None:
                try:
                    start = datetime.fromisoformat(str(span.get("start_time"))).timestamp()
                except ValueError:
                    raise DatasetError(f"{where}: start_time must be an ISO date and time") from None
            chars = sum(len(m["content"]) for m in messages)
            entries.append(Entry(start * 1000, self._tokens(attributes, self.input_tokens, where)
                                 or max(1, chars // CHARS_PER_TOKEN),
                                 self._tokens(attributes, self.output_tokens, where)
                                 or max(1, len(str(attributes.get("gen_ai.output.text", ""))) // CHARS_PER_TOKEN),
                                 (), where.removeprefix(f"{path} "), messages))
        if not entries:
            raise DatasetError(f"{path}: no span carries gen_ai.input.messages: nothing to replay")
        return TraceFile(path, entries, self.name)

    @staticmethod
    def _tokens(attributes: dict, names: tuple[str, ...], where: str) -> int | None:
        for name in names:
            value = attributes.get(name)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise DatasetError(f"{where}: {name} must be a positive integer")
            return value
        return None

    @staticmethod
    def _messages(value: object, where: str) -> tuple[dict, ...]:
        try:
            raw = json.loads(value) if isinstance(value, str) else value
        except json.JSONDecodeError:
            raise DatasetError(f"{where}: gen_ai.input.messages is not JSON") from None
        if not isinstance(raw, list) or not raw:
            raise DatasetError(f"{where}: gen_ai.input.messages must be a non-empty list of messages")
        messages = []
        for m in raw:
            role = m.get("role") if isinstance(m, dict) else None
            text = _text(m.get("content", m.get("parts"))) if isinstance(m, dict) else None
            if role not in ("system", "user", "assistant", "tool") or text is None:
                raise DatasetError(f"{where}: gen_ai.input.messages: each message needs a role and text content")
            messages.append({"role": "user" if role == "tool" else role, "content": text})
        return tuple(messages)


FORMATS: dict[str, TraceFormat] = {f.name: f for f in (Mooncake(), Azure(), Weka(), OTel())}


def read_trace(path: Path, fmt: str = "auto") -> TraceFile:
    """The trace's entries in time order, in the format given or the one its file shows; DatasetError
    naming the line or row and field it cannot read."""
    text = read_text(path).lstrip()
    if fmt == "auto":
        found = next((f for f in FORMATS.values() if f.knows(text)), None)
        if found is None:
            raise DatasetError(f"{path}: not a trace loadwatch knows (--trace-format: "
                               f"{', '.join(f'{f.name}, {f.summary}' for f in FORMATS.values())})")
    else:
        found = FORMATS[fmt]
    trace = found.read(path, text)
    if not trace.entries:
        raise DatasetError(f"{path} holds no entry")
    return TraceFile(path, sorted(trace.entries, key=lambda e: e.timestamp), trace.format, trace.block_tokens)
