"""Trace replay: a timestamped trace, each entry a request at its own time.

The formats (Mooncake's, Azure's, WEKA's, OpenTelemetry's) are read by workloads/trace_formats.py.
An entry made of `hash_ids` is the prompt's blocks of `--trace-block-tokens` (512 in Mooncake's
traces; a WEKA trace gives its own): entries that share a hash id share that block of prompt, so the
trace's prefix sharing reaches the server's prefix cache as it was. Each block's text is made once,
of the block's length in the server's own tokens. An entry with its own messages (a span's) sends
them.

Entries that cannot fit the server's context are skipped, counted and named before the replay
(workloads/context.py): their tickets go by, each a request not sent.
"""

from __future__ import annotations

import random

from loadwatch.workloads.prompt import Prompt
from loadwatch.workloads.tokens import Tokenizer
from loadwatch.workloads.trace_formats import TraceFile


class Trace:
    """The entries, their prompts made of shared blocks, and when each is due."""

    def __init__(self, trace: TraceFile, tokenizer: Tokenizer, block_tokens: int, seed: int) -> None:
        self.path, self.entries, self.tokenizer, self.seed = trace.path, trace.entries, tokenizer, seed
        self.block_tokens = trace.block_tokens or block_tokens
        self.format = trace.format
        self.start = self.entries[0].timestamp
        self.blocks: dict[tuple[int, int], str] = {}
        self.skipped: set[int] = set()  # entries that cannot fit the server's context: not sent

    def _block(self, hash_id: int, tokens: int) -> str:
        key = (hash_id, tokens)
        if key not in self.blocks:
            self.blocks[key] = self.tokenizer.text_of_length(random.Random(f"{self.seed}-{hash_id}"), tokens)
        return self.blocks[key]

    def prompt(self, index: int) -> Prompt:
        """Entry `index` as a request: its blocks in order, the last one cut to the input length (a
        block of its own length: its hash stands for that part-block only); blocks are made once."""
        entry = self.entries[index]
        if entry.messages is not None:
            return Prompt(entry.messages, entry.output_length)
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
