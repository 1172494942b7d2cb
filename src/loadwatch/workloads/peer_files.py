"""Prompt files in the formats of the tools users come from, read by `--dataset jsonl` (and, for
AIPerf's multi-turn sessions, `--dataset sessions`), each named by `--dataset-format` or known from
the file, and said in one line how it was read.

- loadwatch: `{"prompt"}` or `{"messages"}` per line, with `max_tokens` and any field of the request's
  body (vLLM's `--dataset-name custom` files are such lines).
- guidellm: GuideLLM's JSONL or CSV: `prompt` and `output_tokens_count` (its aliases too), which
  becomes the request's `max_tokens`; GuideLLM's other columns are its own, never sent.
- aiperf: AIPerf's `single_turn` (`text`, or `texts`: the parts of one message) and `multi_turn`
  (`session_id`, `turns` of `text`/`texts`) files.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.files import json_lines, read_jsonl, read_text
from loadwatch.workloads.prompt import Prompt

# GuideLLM's column names for each role (its --data-column-mapper defaults).
PROMPT_COLUMNS = ("prompt", "text", "input", "instruction", "question", "content")
OUTPUT_COLUMNS = ("output_tokens_count", "completion_tokens_count")
COUNT_COLUMNS = (*OUTPUT_COLUMNS, "prompt_tokens_count", "input_tokens_count")


def _first_object(path: Path) -> dict | None:
    """The file's first JSON line, read alone (its reader reads the whole file, and says what is wrong
    with it)."""
    try:
        with path.open(encoding="utf-8") as lines:
            item = json.loads(next((line for line in lines if line.strip()), "null"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return item if isinstance(item, dict) else None


def detect(path: Path) -> str:
    """The format a prompt file shows: CSV is GuideLLM's; a JSON line by its fields."""
    if path.suffix.lower() == ".csv":
        return "guidellm"
    first = _first_object(path) or {}
    if "text" in first or "texts" in first or ("session_id" in first and "turns" in first):
        return "aiperf"
    if "prompt" in first and any(column in first for column in COUNT_COLUMNS):
        return "guidellm"
    return "loadwatch"


def _tokens(value: object, where: str, column: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        tokens = int(str(value))
    except ValueError:
        raise DatasetError(f"{where}: {column} must be a whole number of tokens, not {value!r}") from None
    if tokens < 1:
        raise DatasetError(f"{where}: {column} must be at least 1")
    return tokens


def _guidellm_row(row: dict, where: str) -> Prompt:
    column = next((c for c in PROMPT_COLUMNS if isinstance(row.get(c), str) and row[c]), None)
    if column is None:
        raise DatasetError(f"{where}: no prompt: GuideLLM's files need one of the columns "
                           f"{', '.join(PROMPT_COLUMNS)}")
    output = next((c for c in OUTPUT_COLUMNS if row.get(c) not in (None, "")), None)
    return Prompt.user_text(row[column], _tokens(row.get(output), where, output) if output else None)


def read_guidellm(path: Path) -> list[Prompt]:
    if path.suffix.lower() == ".csv":
        rows = csv.DictReader(io.StringIO(read_text(path)))
        prompts = [_guidellm_row(row, f"{path} row {number}") for number, row in enumerate(rows, start=2)]
    else:
        prompts = [_guidellm_row(item, where) for where, item in json_lines(path, "`prompt`")]
    if not prompts:
        raise DatasetError(f"{path} holds no prompt")
    return prompts


def _aiperf_text(item: dict, where: str) -> str:
    """A turn's text: `text`, or `texts`, the parts of one message (strings, or named fields' contents)."""
    if isinstance(item.get("text"), str) and item["text"]:
        return item["text"]
    texts = item.get("texts")
    if isinstance(texts, list) and texts:
        parts: list[str] = []
        for part in texts:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("contents"), list):
                parts += [c for c in part["contents"] if isinstance(c, str)]
        if parts:
            return "\n".join(parts)
    raise DatasetError(f"{where}: expected `text` or `texts` (AIPerf's single_turn or multi_turn)")


def read_aiperf_prompts(path: Path) -> list[Prompt]:
    prompts = []
    for where, item in json_lines(path, "`text` or `texts`"):
        if "turns" in item:
            raise DatasetError(f"{where}: an AIPerf multi_turn session: replay it with --dataset sessions")
        prompts.append(Prompt.user_text(_aiperf_text(item, where), _tokens(item.get("output_length"), where,
                                                                           "output_length")))
    return prompts


def read_aiperf_sessions(path: Path) -> list[dict]:
    """AIPerf's multi_turn sessions as loadwatch's: {system, turns, max_tokens, body}."""
    sessions = []
    for where, item in json_lines(path, "`session_id` and `turns`"):
        turns = item.get("turns")
        if not isinstance(turns, list) or not turns or not all(isinstance(t, dict) for t in turns):
            raise DatasetError(f"{where}: `turns` must be a non-empty list of AIPerf turns ({{\"text\": ...}})")
        sessions.append({"system": None, "turns": [_aiperf_text(t, f"{where} turn {i}") for i, t in
                                                   enumerate(turns, start=1)], "max_tokens": None, "body": None})
    return sessions


def read_prompts(path: Path, fmt: str = "auto") -> tuple[list[Prompt], str]:
    """The file's prompts, in its format, and the line that says how it was read."""
    found = detect(path) if fmt == "auto" else fmt
    if found == "guidellm":
        prompts = read_guidellm(path)
        how = "GuideLLM's: prompt, and output_tokens_count as max_tokens; its other columns not sent"
    elif found == "aiperf":
        prompts = read_aiperf_prompts(path)
        how = "AIPerf's single_turn: text, or texts as one message's parts"
    else:
        prompts = read_jsonl(path)
        how = "loadwatch's JSON Lines: prompt or messages, max_tokens, and every other field in the request's body"
    said = f"dataset {path} read as {how} ({len(prompts)} prompts)"
    return prompts, said + ("; --dataset-format names another" if fmt == "auto" else "")
