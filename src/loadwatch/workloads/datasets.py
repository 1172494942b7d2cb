"""The workloads of `vllm bench serve` and of the seeds: each a deterministic list for a seed.

`validate` reads and checks the files before the run starts (no server needed); `build` makes the
prompts once the server is known, for token lengths measured by its own tokenizer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from loadwatch.settings import LoadSettings
from loadwatch.workloads.builtin import builtin_prompts
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.files import read_jsonl, read_session_lines, read_sharegpt, read_tools
from loadwatch.workloads.prompt import Cycle, Prompt, Workload
from loadwatch.workloads.sessions import GENERATED_TURNS, STATIC_STAMP, Script, Sessions, generated, longest, stamps
from loadwatch.workloads.tokens import Tokenizer
from loadwatch.workloads.trace import Trace, read_trace

SAMPLES = Path(__file__).with_name("samples")
DEFAULT_PATHS = {"sharegpt": SAMPLES / "sharegpt-50.json", "agent": SAMPLES / "agent-conversation.json",
                 "jsonl": SAMPLES / "prompts.jsonl", "trace": SAMPLES / "mooncake-sample.jsonl"}
SAMPLE_TOOLS = SAMPLES / "tools.json"
TOKENIZED = ("sharegpt", "random", "prefix-repetition", "sessions", "trace")  # their lengths are the server's tokens
# vllm bench serve's ShareGPT filter: too short to say anything, or too long for a 2k context.
MIN_LEN, MAX_PROMPT_LEN, MAX_TOTAL_LEN = 4, 1024, 2048


def output_len(settings: LoadSettings) -> int:
    return settings.output_len or settings.max_tokens


def dataset_path(settings: LoadSettings) -> Path:
    """The file of a file-backed dataset (sharegpt, agent, jsonl, trace): the user's, or loadwatch's sample."""
    return settings.dataset_path or DEFAULT_PATHS[settings.dataset]


def tools(settings: LoadSettings) -> list[dict] | None:
    """The tools every chat request offers: --tools, or for sessions loadwatch's sample."""
    if settings.tools == "none":
        return None
    if settings.tools:
        return read_tools(Path(settings.tools))
    return read_tools(SAMPLE_TOOLS) if settings.dataset == "sessions" else None


def validate(settings: LoadSettings) -> LoadSettings:
    """The settings as the run uses them (a trace sends each entry once: its --num-requests is the
    trace's length, or fewer); DatasetError for an unreadable or malformed dataset or tools file, or
    a workload these options cannot run, before any request."""
    if settings.dataset == "jsonl":
        read_jsonl(dataset_path(settings))
    elif settings.dataset in ("sharegpt", "agent"):
        read_sharegpt(dataset_path(settings))
    elif settings.dataset == "sessions":
        if settings.endpoint != "chat":
            raise DatasetError("sessions are conversations: they need --endpoint chat")
        if settings.request_rate is not None:
            raise DatasetError("sessions are closed loops (each user a conversation, answer then next turn): "
                               "use -u users and --think-time, not --request-rate")
        if settings.dataset_path is not None:
            _session_scripts(settings.dataset_path, None, None)
    elif settings.dataset == "trace":
        entries = len(read_trace(dataset_path(settings)))
        settings = settings.model_copy(update={"num_requests": min(settings.num_requests or entries, entries)})
        given = [name for name, on in (("--request-rate", settings.request_rate), ("--shape", settings.shape),
                                       ("--warmup-requests", settings.warmup_requests),
                                       ("--warmup-seconds", settings.warmup_seconds)) if on]
        if given:
            raise DatasetError(f"a trace sets its own times and sends each entry once: {', '.join(given)} "
                               "cannot go with it (--speedup changes its pace)")
    if tools(settings) and settings.endpoint != "chat":
        raise DatasetError("--tools needs --endpoint chat")
    return settings


def _sharegpt(settings: LoadSettings, tokenizer: Tokenizer, rng: random.Random) -> list[Prompt]:
    conversations = read_sharegpt(dataset_path(settings))
    rng.shuffle(conversations)
    prompts = []
    for messages in conversations:
        prompt, completion = messages[0]["content"], messages[1]["content"]
        prompt_len = tokenizer.count(prompt)
        output_len = settings.sharegpt_output_len or tokenizer.count(completion)
        if prompt_len < MIN_LEN or output_len < MIN_LEN:
            continue
        if prompt_len > MAX_PROMPT_LEN or prompt_len + output_len > MAX_TOTAL_LEN:
            continue
        prompts.append(Prompt.user_text(prompt, output_len))
        if len(prompts) == settings.dataset_size:
            break
    if not prompts:
        raise DatasetError(f"no conversation of {dataset_path(settings)} passes the length filter")
    return prompts


def _lengths(rng: random.Random, mean: int, ratio: float) -> int:
    return rng.randint(max(1, int(mean * (1 - ratio))), max(1, int(mean * (1 + ratio))))


def _random(settings: LoadSettings, tokenizer: Tokenizer, rng: random.Random) -> list[Prompt]:
    prefix = tokenizer.text_of_length(rng, settings.prefix_len) + " " if settings.prefix_len else ""
    return [
        Prompt.user_text(
            prefix + tokenizer.text_of_length(rng, _lengths(rng, settings.input_len, settings.range_ratio)),
            _lengths(rng, output_len(settings), settings.range_ratio),
        )
        for _ in range(settings.dataset_size)
    ]


def _prefix_repetition(settings: LoadSettings, tokenizer: Tokenizer, rng: random.Random) -> list[Prompt]:
    prefixes = [tokenizer.text_of_length(rng, settings.prefix_len or 256) for _ in range(settings.num_prefixes)]
    prompts = [Prompt.user_text(f"{prefix} {tokenizer.text_of_length(rng, settings.suffix_len)}", output_len(settings))
               for prefix in prefixes for _ in range(max(1, settings.dataset_size // settings.num_prefixes))]
    rng.shuffle(prompts)
    return prompts


def agent(settings: LoadSettings, offered: list[dict] | None = None) -> Workload:
    """The seeds' agent session: the whole conversation up to its last user turn, replayed, with a
    date-time at the very start of the first turn; the same one every time (`static`, all of it is
    a cacheable prefix) or a new one per request (`dynamic`, nothing after it can be cached)."""
    messages = read_sharegpt(dataset_path(settings))[0]
    while messages[-1]["role"] != "user":
        messages = messages[:-1]
    first = next(i for i, m in enumerate(messages) if m["role"] == "user")
    return AgentSession(messages, first, stamps(settings.agent_prefix == "static"), output_len(settings),
                        {"tools": offered} if offered else None)


class AgentSession:
    """The agent conversation with its date-time: the same every time (static) or a new one each."""

    def __init__(self, messages: list[dict], first: int, stamp: Callable[[], str], max_tokens: int | None,
                 body: dict | None = None) -> None:
        self.messages, self.first, self.stamp, self.max_tokens, self.body = messages, first, stamp, max_tokens, body
        self.prompts: Sequence[Prompt] = [self.stamped(STATIC_STAMP)]  # a dynamic stamp has the same length

    def stamped(self, stamp: str) -> Prompt:
        messages = [dict(m) for m in self.messages]
        messages[self.first]["content"] = f"{stamp} {messages[self.first]['content']}"
        return Prompt(tuple(messages), self.max_tokens, self.body)

    def __call__(self) -> Prompt:
        return self.stamped(self.stamp())


def _session_scripts(path: Path, max_tokens: int | None, body: dict | None) -> list[Script]:
    """A file's sessions: JSON Lines of {"turns": [...]}, or ShareGPT conversations (their human turns;
    the recorded answers give way to the model's own)."""
    if path.suffix == ".jsonl":
        return [Script(s["system"], s["turns"], s["max_tokens"] or max_tokens, {**(body or {}), **(s["body"] or {})})
                for s in read_session_lines(path)]
    scripts = []
    for messages in read_sharegpt(path):
        system = "\n".join(m["content"] for m in messages if m["role"] == "system") or None
        scripts.append(Script(system, [m["content"] for m in messages if m["role"] == "user"], max_tokens, body))
    return scripts


def sessions(settings: LoadSettings, tokenizer: Tokenizer, rng: random.Random) -> Sessions:
    offered = tools(settings)
    body = {"tools": offered} if offered else None
    static = settings.agent_prefix == "static"
    if settings.dataset_path is None:
        turns = settings.turns or GENERATED_TURNS
        scripts, tool_result, longest_prompt = generated(tokenizer, rng, turns, settings.turn_len, settings.system_len,
                                                         output_len(settings), body)
        return Sessions(scripts, turns, static, tool_result, [longest_prompt], label=True)
    scripts = _session_scripts(settings.dataset_path, output_len(settings), body)
    rng.shuffle(scripts)
    answer = tokenizer.text_of_length(rng, output_len(settings))
    return Sessions(scripts, settings.turns, static, tokenizer.text_of_length(rng, settings.turn_len),
                    [longest(s, answer) for s in scripts], label=False)


def _with_tools(prompts: list[Prompt], offered: list[dict] | None) -> list[Prompt]:
    if not offered:
        return prompts
    return [replace(p, body={"tools": offered, **(p.body or {})}) for p in prompts]


def build(settings: LoadSettings, tokenizer: Tokenizer | None) -> Workload | Sessions | Trace:
    """The prompts of the chosen dataset, served in a cycle; the same order for the same seed."""
    rng = random.Random(settings.seed)
    offered = tools(settings)
    if settings.dataset == "builtin":
        return Cycle(_with_tools(list(builtin_prompts().prompts), offered))
    if settings.dataset == "agent":
        return agent(settings, offered)
    if settings.dataset == "jsonl":
        prompts = read_jsonl(dataset_path(settings))
        rng.shuffle(prompts)
        return Cycle(_with_tools(prompts, offered))
    if tokenizer is None:  # loadgen/process.py gives one to the datasets in its TOKENIZED
        raise TypeError(f"the {settings.dataset} dataset measures lengths with a tokenizer")
    if settings.dataset == "sessions":
        return sessions(settings, tokenizer, rng)
    if settings.dataset == "trace":
        return Trace(read_trace(dataset_path(settings)), tokenizer, settings.trace_block_tokens, settings.seed)
    make = {"sharegpt": _sharegpt, "random": _random, "prefix-repetition": _prefix_repetition}[settings.dataset]
    return Cycle(_with_tools(make(settings, tokenizer, rng), offered))
