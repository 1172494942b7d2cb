"""One request's input, whatever workload produced it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import cycle, islice
from typing import Protocol


@dataclass(frozen=True)
class Prompt:
    messages: tuple[dict, ...]
    max_tokens: int | None = None  # None: the run's --max-tokens
    body: dict | None = None  # the request's own fields (tools, response_format, ...), over --extra-body
    turn: int | None = None  # a session's turn, from 1
    images: int = 0  # images in its messages (random-mm), and their encoded bytes, before base64
    image_bytes: int = 0
    prefix: int | None = None  # which of the workload's shared prefixes it starts with (prefix-repetition)

    @classmethod
    def user_text(cls, text: str, max_tokens: int | None = None, body: dict | None = None) -> Prompt:
        return cls(({"role": "user", "content": text},), max_tokens, body)

    @property
    def text(self) -> str:
        """The messages as one prompt, for the completions endpoint."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)


class Workload(Protocol):
    """Where a user gets its next prompt; `prompts` are the distinct ones, checked before the run."""

    prompts: Sequence[Prompt]

    def __call__(self) -> Prompt: ...


class Conversation(Protocol):
    """One user's session: its next turn (None once it is over), and what the model answered."""

    def next(self) -> Prompt | None: ...

    def answered(self, message: dict | None) -> None: ...


def part_start(part: int, parts: int, length: int) -> int:
    """Where process `part` of a run's `parts` starts in a workload of `length` items. Every process
    of a distributed run builds the same items from the same --seed: from the start, each would send
    the same prompt at about the same moment, and the server's prefix cache would answer all but the
    first. From their own parts, together they send each item once before any is sent again, as one
    process does."""
    return part % parts * length // parts


class Cycle:
    """Prompts served in a cycle; every user of a process shares it."""

    def __init__(self, prompts: Sequence[Prompt]) -> None:
        self.prompts = prompts
        self._next = cycle(prompts).__next__

    def share(self, part: int, parts: int) -> None:
        """Start at this process's part of the prompts (`part_start`)."""
        self._next = islice(cycle(self.prompts), part_start(part, parts, len(self.prompts)), None).__next__

    def __call__(self) -> Prompt:
        return self._next()
