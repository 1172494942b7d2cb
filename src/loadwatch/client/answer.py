"""What a stream said, put back together: the text to count when the server sent no usage, and
the assistant message a session appends to its history."""

from __future__ import annotations

from loadwatch.client.chunks import Chunk


class Answer:
    __slots__ = ("calls", "content", "reasoning")

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict] = {}  # tool calls by their stream index

    def add(self, chunk: Chunk) -> None:
        if chunk.content:
            self.content.append(chunk.content)
        if chunk.reasoning:
            self.reasoning.append(chunk.reasoning)
        for piece in chunk.tool_calls:
            call = self.calls.get(piece.index)
            if call is None:
                call = self.calls[piece.index] = {"id": f"call_{piece.index}", "type": "function",
                                                  "function": {"name": "", "arguments": ""}}
            if piece.id:
                call["id"] = piece.id
            if piece.name:
                call["function"]["name"] = piece.name
            call["function"]["arguments"] += piece.arguments

    @property
    def tool_calls(self) -> int:
        return len(self.calls)

    def text(self) -> str:
        """All generated text, thoughts and tool-call arguments included: what output tokens count."""
        return "".join(self.reasoning) + "".join(self.content) + \
            "".join(c["function"]["arguments"] for c in self.calls.values())

    def message(self) -> dict:
        """The assistant's turn as the chat API takes it back (without its thoughts, as agents send it)."""
        message: dict = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return message
