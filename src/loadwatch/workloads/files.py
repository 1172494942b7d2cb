"""Reading dataset files: JSON Lines of prompts, and ShareGPT's conversations JSON."""

from __future__ import annotations

import json
from pathlib import Path

from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.prompt import Prompt

ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


def _read(path: Path) -> str:
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


def read_jsonl(path: Path) -> list[Prompt]:
    """One `{"prompt": ..., "max_tokens": ...}` or `{"messages": [...], "max_tokens": ...}` per line."""
    prompts = []
    for number, line in enumerate(_read(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise DatasetError(f"{where}: expected an object with `prompt` or `messages`")
        max_tokens = item.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise DatasetError(f"{where}: max_tokens must be a positive integer")
        if "messages" in item:
            prompts.append(Prompt(_messages(item["messages"], where), max_tokens))
        elif isinstance(item.get("prompt"), str) and item["prompt"]:
            prompts.append(Prompt.user_text(item["prompt"], max_tokens))
        else:
            raise DatasetError(f"{where}: expected a non-empty `prompt` string or a `messages` list")
    if not prompts:
        raise DatasetError(f"{path} holds no prompt")
    return prompts


def read_sharegpt(path: Path) -> list[list[dict]]:
    """ShareGPT's JSON: a list of {"conversations": [{"from": "human"|"gpt", "value": ...}, ...]}.

    Returns each conversation as chat messages; conversations of fewer than two turns are skipped,
    as `vllm bench serve` does.
    """
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path} line {exc.lineno}: not JSON ({exc.msg})") from None
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
        if len(messages) >= 2:
            conversations.append(messages)
    if not conversations:
        raise DatasetError(f"{path} holds no conversation of two turns or more")
    return conversations
