"""Trace replay: a timestamped trace in the Mooncake format, each entry a request at its own time.

One JSON object per line: `timestamp` (ms from the trace's start), `input_length` and
`output_length` (tokens) and `hash_ids`, the prompt's blocks of `--trace-block-tokens` (512 in
Mooncake's traces) tokens: entries that share a hash id share that block of prompt, so the trace's
prefix sharing reaches the server's prefix cache as it was. Each block's text is made once, of the
block's length in the server's own tokens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.files import json_lines
from loadwatch.workloads.prompt import Prompt
from loadwatch.workloads.tokens import Tokenizer

LONGEST = 3  # entries measured against the server's context before the replay


@dataclass(frozen=True)
class Entry:
    timestamp: float  # ms
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _count(item: dict, name: str, where: str, least: int) -> int:
    value = item.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise DatasetError(f"{where}: {name} must be an integer of at least {least}")
    return value


def read_trace(path: Path) -> list[Entry]:
    """The trace's entries in time order; DatasetError naming the first bad line."""
    entries = []
    for where, item in json_lines(path, "timestamp, input_length, output_length and hash_ids"):
        timestamp = item.get("timestamp")
        if not isinstance(timestamp, int | float) or isinstance(timestamp, bool) or timestamp < 0:
            raise DatasetError(f"{where}: timestamp must be a number of milliseconds, 0 or more")
        hash_ids = item.get("hash_ids", [])
        if not isinstance(hash_ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hash_ids):
            raise DatasetError(f"{where}: hash_ids must be a list of integers")
        entries.append(Entry(float(timestamp), _count(item, "input_length", where, 1),
                             _count(item, "output_length", where, 1), tuple(hash_ids)))
    return sorted(entries, key=lambda e: e.timestamp)


class Trace:
    """The entries, their prompts made of shared blocks, and when each is due."""

    def __init__(self, entries: list[Entry], tokenizer: Tokenizer, block_tokens: int, seed: int) -> None:
        self.entries, self.tokenizer, self.block_tokens, self.seed = entries, tokenizer, block_tokens, seed
        self.start = entries[0].timestamp
        self.blocks: dict[tuple[int, int], str] = {}
        longest = sorted(range(len(entries)), key=lambda i: entries[i].input_length)[-LONGEST:]
        self.prompts = [self.prompt(i) for i in longest]  # for the context check

    def _block(self, hash_id: int, tokens: int) -> str:
        key = (hash_id, tokens)
        if key not in self.blocks:
            self.blocks[key] = self.tokenizer.text_of_length(random.Random(f"{self.seed}-{hash_id}"), tokens)
        return self.blocks[key]

    def prompt(self, index: int) -> Prompt:
        """Entry `index` as a request: its blocks in order, the last one cut to the input length (a
        block of its own length: its hash stands for that part-block only); blocks are made once."""
        entry = self.entries[index]
        ids = entry.hash_ids or (-1 - index,)  # no hash ids: a prompt of its own
        full = min(len(ids), entry.input_length // self.block_tokens)
        parts = [self._block(h, self.block_tokens) for h in ids[:full]]
        rest = entry.input_length - full * self.block_tokens
        if rest > 0:
            parts.append(self._block(ids[min(full, len(ids) - 1)], rest))
        return Prompt.user_text(" ".join(parts), entry.output_length)

    def due(self, index: int, speedup: float) -> float:
        """Seconds after the replay's start that entry `index` is sent."""
        return (self.entries[index].timestamp - self.start) / 1000.0 / speedup
