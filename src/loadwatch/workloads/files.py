"""Reading dataset files: JSON Lines of prompts, and ShareGPT's conversations JSON."""

from __future__ import annotations

import json
from pathlib import Path

from loadwatch.settings import OWN_BODY_FIELDS
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.prompt import Prompt

ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"cannot read dataset {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path} is not UTF-8 text") from None


def _messages(value: object, where: str) -> tuple[dict, ...]:
    if not isinstance(value, list) or not value:
        raise DatasetError(f"{where}: `messages` must be a non-empty list")
    for m in value:
        if not isinstance(m, dict) or m.get("role") not in ROLES.values() or not isinstance(m.get("content"), str):
            raise DatasetError(f"{where}: each message needs a role (system/user/assistant) and text content")
    return tuple(value)


def json_lines(path: Path, what: str) -> list[tuple[str, dict]]:
    """Each non-blank line of a JSON Lines file as an object, with where it is."""
    out = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise DatasetError(f"{where}: expected an object with {what}")
        out.append((where, item))
    if not out:
        raise DatasetError(f"{path} holds no line")
    return out


def _max_tokens(item: dict, where: str) -> int | None:
    max_tokens = item.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise DatasetError(f"{where}: max_tokens must be a positive integer")
    return max_tokens


def _body(item: dict, where: str, own: frozenset[str]) -> dict | None:
    """A line's other fields, sent with its request as they are (tools, response_format, top_k, ...)."""
    body = {k: v for k, v in item.items() if k not in own}
    taken = sorted(set(body) & OWN_BODY_FIELDS)
    if taken:
        raise DatasetError(f"{where}: {', '.join(taken)} is set by loadwatch, not by a dataset line")
    if "tools" in body:
        check_tools(body["tools"], where)
    return body or None


def read_jsonl(path: Path) -> list[Prompt]:
    """One `{"prompt": ...}` or `{"messages": [...]}` per line, with `max_tokens` and any field of the
    request's body (`tools`, `response_format`, sampling) for that request alone."""
    prompts = []
    for where, item in json_lines(path, "`prompt` or `messages`"):
        max_tokens = _max_tokens(item, where)
        body = _body(item, where, frozenset({"prompt", "messages", "max_tokens"}))
        if "messages" in item:
            prompts.append(Prompt(_messages(item["messages"], where), max_tokens, body))
        elif isinstance(item.get("prompt"), str) and item["prompt"]:
            prompts.append(Prompt.user_text(item["prompt"], max_tokens, body))
        else:
            raise DatasetError(f"{where}: expected a non-empty `prompt` string or a `messages` list")
    return prompts


def read_session_lines(path: Path) -> list[dict]:
    """Sessions as JSON Lines: `{"turns": ["...", ...], "system": "...", "tools": [...], "max_tokens": N}`
    per line, and any other field of the request's body; returned as {system, turns, max_tokens, body}."""
    sessions = []
    for where, item in json_lines(path, "`turns`"):
        turns = item.get("turns")
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t for t in turns):
            raise DatasetError(f"{where}: `turns` must be a non-empty list of the user's messages")
        system = item.get("system")
        if system is not None and not isinstance(system, str):
            raise DatasetError(f"{where}: `system` must be a string")
        sessions.append({"system": system, "turns": turns, "max_tokens": _max_tokens(item, where),
                         "body": _body(item, where, frozenset({"turns", "system", "max_tokens"}))})
    return sessions


def check_tools(tools: object, where: str) -> list[dict]:
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name") for t in tools):
        raise DatasetError(f"{where}: tools must be a list of OpenAI tool definitions "
                           '({"type": "function", "function": {"name": ..., "parameters": ...}})')
    return tools


def read_json(path: Path, text: str | None = None) -> object:
    """The file's one JSON document (`text`, where it was read already); DatasetError naming the line
    where it stops being JSON."""
    try:
        return json.loads(read_text(path) if text is None else text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path} line {exc.lineno}: not JSON ({exc.msg})") from None


def read_tools(path: Path) -> list[dict]:
    return check_tools(read_json(path), str(path))


def read_sharegpt(path: Path, min_turns: int = 2) -> list[list[dict]]:
    """ShareGPT's JSON: a list of {"conversations": [{"from": "human"|"gpt", "value": ...}, ...]}.

    Returns each conversation as chat messages; conversations of fewer than `min_turns` turns are
    skipped: two, as `vllm bench serve` does, unless the answer's length is given (one: a human turn
    alone, as in files kept for their prompts).
    """
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of conversations")
    conversations = []
    for index, item in enumerate(data):
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list):
            raise DatasetError(f"{path}: conversation {index} has no `conversations` list")
        messages = []
        for turn in turns:
            if not isinstance(turn, dict) or turn.get("from") not in ROLES or not isinstance(turn.get("value"), str):
                raise DatasetError(f"{path}: conversation {index} has a turn without `from` (human/gpt) and `value`")
            messages.append({"role": ROLES[turn["from"]], "content": turn["value"]})
        if len(messages) >= min_turns and (min_turns > 1 or messages[0]["role"] == "user"):
            conversations.append(messages)
    if not conversations:
        hint = "" if min_turns == 1 else \
            "; with --sharegpt-output-len N its first human turns are sent, each asking N tokens"
        raise DatasetError(f"{path} holds no conversation of {min_turns} turn{'s' * (min_turns > 1)} or more{hint}")
    return conversations
