"""Sessions: each Locust user is a conversation whose history grows with what the model answers.

A session's script is what its user says whatever the model answers (a system prompt, user turns,
tools); each turn sends the whole history so far, the model's real answers (text and tool calls)
included, so that turn after turn the server can find the conversation in its prefix cache. An
answer that calls tools gets a synthetic result for each call as the next turn.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import count

from loadwatch.workloads.prompt import Prompt, part_start
from loadwatch.workloads.tokens import Tokenizer

STATIC_STAMP = "2025-01-01 00:00:00"
GENERATED_TURNS = 5
# An agent's tool loop has a bound: after this many tool rounds in a row the user speaks anyway.
MAX_TOOL_ROUNDS = 4
POOL = 16  # distinct generated user turns a process draws from
SYSTEM_INTRO = ("You are an operations agent for an LLM serving platform. Use the tools to look at metrics "
                "and logs before you answer. ")


@dataclass(frozen=True)
class Script:
    system: str | None
    turns: Sequence[str]
    max_tokens: int | None = None
    body: dict | None = None  # tools and other request fields of every turn


def stamps(static: bool) -> Callable[[], str]:
    """The date-time at the start of each request: always the same (all of it a cacheable prefix) or a
    new one per request (the seeds' dynamic prefix: nothing after it can be cached)."""
    if static:
        return lambda: STATIC_STAMP
    requests = count()
    return lambda: (datetime(2025, 1, 1) - timedelta(minutes=next(requests) + 1)).strftime("%Y-%m-%d %H:%M:%S")


class Session:
    def __init__(self, script: Script, label: str, max_turns: int | None, stamp: Callable[[], str],
                 tool_result: str) -> None:
        self.script, self.max_turns, self.stamp, self.tool_result = script, max_turns, stamp, tool_result
        self.user_turns = iter(script.turns)
        self.history: list[dict] = [{"role": "system", "content": script.system}] if script.system else []
        first = next(self.user_turns)
        self.pending: list[dict] = [{"role": "user", "content": f"{label} {first}" if label else first}]
        self.turn = 0
        self.tool_rounds = 0

    def next(self) -> Prompt | None:
        if not self.pending or (self.max_turns is not None and self.turn >= self.max_turns):
            return None
        self.history += self.pending
        self.pending = []
        self.turn += 1
        messages = list(self.history)
        messages[0] = {**messages[0], "content": f"{self.stamp()} {messages[0]['content']}"}
        return Prompt(tuple(messages), self.script.max_tokens, self.script.body, self.turn)

    def answered(self, message: dict | None) -> None:
        """The model's answer to the last turn; None (the turn failed) ends the session, as a failed
        step ends an agent's task."""
        if message is None:
            self.pending = []
            return
        self.history.append(message)
        calls = message.get("tool_calls") or []
        self.pending = [{"role": "tool", "tool_call_id": call["id"], "content": self.tool_result} for call in calls]
        self.tool_rounds = self.tool_rounds + 1 if calls else 0
        if calls and self.tool_rounds <= MAX_TOOL_ROUNDS:
            return
        self.tool_rounds = 0
        said = next(self.user_turns, None)
        if said is not None:
            self.pending.append({"role": "user", "content": said})
        elif calls:  # results answer the calls, but with nothing more to say the session ends
            self.pending = []


class Sessions:
    """Where each user gets its conversation: the scripts in turn, every session labelled apart."""

    def __init__(self, scripts: Sequence[Script], max_turns: int | None, static: bool, tool_result: str,
                 prompts: Sequence[Prompt], label: bool) -> None:
        self.scripts, self.max_turns, self.tool_result, self.label = scripts, max_turns, tool_result, label
        self.stamp = stamps(static)
        self.prompts = prompts  # each script's longest conversation, for the context check
        self.part = 0  # this process's index among the run's processes
        self._numbers = count()

    def share(self, part: int, parts: int) -> None:
        """Start at this process's part of the scripts (`part_start`)."""
        self.part = part
        self._numbers = count(part_start(part, parts, len(self.scripts)))

    def start(self) -> Session:
        """The next conversation of this process."""
        number = next(self._numbers)
        script = self.scripts[number % len(self.scripts)]
        # A generated session says who it is first, so that conversations share the system prompt only.
        return Session(script, f"[session {self.part}.{number}]" if self.label else "", self.max_turns, self.stamp,
                       self.tool_result)


def longest(script: Script, answer: str) -> Prompt:
    """The script's whole conversation with every answer as long as max_tokens allows."""
    messages: list[dict] = [{"role": "system", "content": f"{STATIC_STAMP} {script.system}"}] if script.system else []
    for said in script.turns:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": answer}]
    return Prompt(tuple(messages[:-1]), script.max_tokens, script.body)


def generated(tokenizer: Tokenizer, rng: random.Random, turns: int, turn_len: int, system_len: int,
              output_len: int, body: dict | None) -> tuple[list[Script], str, Prompt]:
    """Scripts of `turns` user turns of `turn_len` tokens drawn from a small pool, behind one shared
    system prompt; a tool result of `turn_len` tokens; and the longest conversation they can make."""
    system = SYSTEM_INTRO + tokenizer.text_of_length(rng, system_len) if system_len else SYSTEM_INTRO.strip()
    pool = [tokenizer.text_of_length(rng, turn_len) for _ in range(POOL)]
    scripts = [Script(system, [rng.choice(pool) for _ in range(turns)], output_len, body) for _ in range(POOL)]
    tool_result = tokenizer.text_of_length(rng, turn_len)
    return scripts, tool_result, longest(scripts[0], tokenizer.text_of_length(rng, output_len))
