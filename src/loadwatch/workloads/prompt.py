"""One request's input, whatever workload produced it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    messages: tuple[dict, ...]
    max_tokens: int | None = None  # None: the run's --max-tokens

    @classmethod
    def user_text(cls, text: str, max_tokens: int | None = None) -> Prompt:
        return cls(({"role": "user", "content": text},), max_tokens)

    @property
    def text(self) -> str:
        """The messages as one prompt, for the completions endpoint."""
        return "\n".join(str(m["content"]) for m in self.messages)
