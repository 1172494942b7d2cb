"""The workloads of `vllm bench serve` and of the seeds, one class each: a subclass of `Dataset`
is a --dataset choice (its name, help and sample file come from the class), so a new workload is
one class here and nothing elsewhere.

`validate` reads and checks the files before the run starts (no server needed); `build` makes the
prompts once the server is known, for token lengths measured by its own tokenizer.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from loadwatch.client.endpoints import streams
from loadwatch.workloads.builtin import builtin_prompts
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.files import read_session_lines, read_sharegpt, read_tools
from loadwatch.workloads.images import ImagePrompts, image_size
from loadwatch.workloads.peer_files import detect, read_aiperf_sessions, read_prompts
from loadwatch.workloads.prompt import Cycle, Prompt, Workload
from loadwatch.workloads.sessions import GENERATED_TURNS, STATIC_STAMP, Script, Sessions, generated, longest, stamps
from loadwatch.workloads.tokens import Tokenizer
from loadwatch.workloads.trace import Trace
from loadwatch.workloads.trace_formats import read_trace

if TYPE_CHECKING:  # settings reads this registry for its choices: it cannot be imported from here first
    from loadwatch.settings import LoadSettings

log = logging.getLogger(__name__)
SAMPLES = Path(__file__).with_name("samples")
SAMPLE_TOOLS = SAMPLES / "tools.json"
# vllm bench serve's ShareGPT filter: too short to say anything, or too long for a 2k context.
MIN_LEN, MAX_PROMPT_LEN, MAX_TOTAL_LEN = 4, 1024, 2048
DATASETS: dict[str, Dataset] = {}  # --dataset NAME -> its workload, in the order of the classes below


@dataclass(frozen=True)
class SharedPrefix:
    """What the prompts share at their start, as the dataset built them: a prefix cache keeps each
    distinct prefix once, and without one every request prefills it again."""

    tokens: int  # of each prompt's prefix, in the dataset's own token count
    distinct: int  # different prefixes among the prompts


class Dataset:
    """One workload. A subclass with a `name` registers itself as a --dataset choice."""

    name: ClassVar[str]
    summary: ClassVar[str]  # what it is, for --dataset's help
    sample: ClassVar[Path | None] = None  # loadwatch's own file, used where --dataset-path is not given
    tokenized: ClassVar[bool] = False  # its lengths are counted in the server's tokens: build needs a tokenizer
    timed: ClassVar[bool] = False  # it sets when each request is sent, so the load's clock must reach it first
    sample_tools: ClassVar[bool] = False  # its chat requests offer loadwatch's sample tools unless --tools says

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # a base of datasets, as TokenPrompts, names none
            DATASETS[cls.name] = cls()

    def path(self, settings: LoadSettings) -> Path:
        """The dataset's file: the user's, or loadwatch's sample."""
        if settings.dataset_path is not None:
            return settings.dataset_path
        if self.sample is None:
            raise DatasetError(f"the {self.name} dataset needs --dataset-path")
        return self.sample

    def check(self, settings: LoadSettings) -> LoadSettings:
        """The settings as the run uses them; DatasetError for what this dataset cannot run."""
        return settings

    def make(self, settings: LoadSettings, tokenizer: Tokenizer | None, rng: random.Random,
             offered: list[dict] | None) -> Workload | Sessions | Trace:
        raise NotImplementedError

    def shared_prefix(self, settings: LoadSettings) -> SharedPrefix | None:
        """The prefix its prompts share where the dataset makes one; None where it is not known
        (a file's prompts) or there is none."""
        return None


def output_len(settings: LoadSettings) -> int:
    return settings.output_len or settings.max_tokens


def tools(settings: LoadSettings) -> list[dict] | None:
    """The tools every chat request offers: --tools, or loadwatch's sample for a dataset that offers it
    (over chat only: the Responses API's function tools are of another shape)."""
    if settings.tools == "none":
        return None
    if settings.tools:
        return read_tools(Path(settings.tools))
    sampled = DATASETS[settings.dataset].sample_tools and settings.endpoint == "chat"
    return read_tools(SAMPLE_TOOLS) if sampled else None


def dataset_named(name: str) -> Dataset:
    """The dataset of that name; DatasetError listing the choices (LOCUST_DATASET and locust.conf
    reach the settings past the parser's choices)."""
    if name not in DATASETS:
        raise DatasetError(f"{name!r} is none of {', '.join(DATASETS)}")
    return DATASETS[name]


def validate(settings: LoadSettings) -> LoadSettings:
    """The settings as the run uses them (a trace sends each entry once: its --num-requests is the
    trace's length, or fewer); DatasetError for an unknown dataset, an unreadable or malformed
    dataset or tools file, or a workload these options cannot run, before any request."""
    settings = dataset_named(settings.dataset).check(settings)
    if tools(settings) and settings.endpoint != "chat":
        raise DatasetError("--tools needs --endpoint chat")
    return settings


def build(settings: LoadSettings, tokenizer: Tokenizer | None) -> Workload | Sessions | Trace:
    """The prompts of the chosen dataset; the same order for the same seed."""
    dataset = dataset_named(settings.dataset)
    if dataset.tokenized and tokenizer is None:  # loadgen/process.py gives one to the tokenized datasets
        raise TypeError(f"the {dataset.name} dataset measures lengths with a tokenizer")
    return dataset.make(settings, tokenizer, random.Random(settings.seed), tools(settings))


def _with_tools(prompts: list[Prompt], offered: list[dict] | None) -> list[Prompt]:
    if not offered:
        return prompts
    return [replace(p, body={"tools": offered, **(p.body or {})}) for p in prompts]


def _lengths(rng: random.Random, mean: int, ratio: float) -> int:
    return rng.randint(max(1, int(mean * (1 - ratio))), max(1, int(mean * (1 + ratio))))


class Builtin(Dataset):
    name, summary = "builtin", "builtin prompts"

    def make(self, settings: LoadSettings, tokenizer: Tokenizer | None, rng: random.Random,
             offered: list[dict] | None) -> Workload | Sessions | Trace:
        return Cycle(_with_tools(list(builtin_prompts().prompts), offered))


class TokenPrompts(Dataset):
    """Prompts whose lengths are the server's tokens, served in a cycle."""

    tokenized = True

    def make(self, settings: LoadSettings, tokenizer: Tokenizer | None, rng: random.Random,
             offered: list[dict] | None) -> Workload | Sessions | Trace:
        assert tokenizer is not None  # build gives one to every tokenized dataset
        return Cycle(_with_tools(self.prompts(settings, tokenizer, rng), offered))

    def prompts(self, settings: LoadSettings, tokenizer: Tokenizer, rng: random.Random) -> list[Prompt]:
        raise NotImplementedError


class ShareGPT(TokenPrompts):
    name, summary = "sharegpt", "ShareGPT conversations (their first turn), filtered as vllm bench serve does"
    sample = SAMPLES / "sharegpt-50.json"

    def check(self, settings: LoadSettings) -> LoadSettings:
        read_sharegpt(self.path(settings), 1 if settings.sharegpt_output_len else 2)
        return settings

    def prompts(self, settings: LoadSettings, tokenizer: Tokenizer, rng: random.Random) -> list[Prompt]:
        conversations = read_sharegpt(self.path(settings), 1 if settings.sharegpt_output_len else 2)
        rng.shuffle(conversations)
        prompts: list[Prompt] = []
        for messages in conversations:
            prompt = messages[0]["content"]
            prompt_len = tokenizer.count(prompt)
            wanted = settings.sharegpt_output_len or tokenizer.count(messages[1]["content"])
            if prompt_len < MIN_LEN or wanted < MIN_LEN:
                continue
            if prompt_len > MAX_PROMPT_LEN or prompt_len + wanted > MAX_TOTAL_LEN:
                continue
            prompts.append(Prompt.user_text(prompt, wanted))
            if len(prompts) == settings.dataset_size:
                break
        if not prompts:
            raise DatasetError(f"no conversation of {self.path(settings)} passes vllm bench serve's length filter "
                               f"(prompt and answer {MIN_LEN} tokens or more, prompt at most {MAX_PROMPT_LEN}, both "
                               f"at most {MAX_TOTAL_LEN}); --sharegpt-output-len sets the answer's")
        return prompts


class Random(TokenPrompts):
    name, summary = "random", "random token prompts of set lengths"

    def prompts(self, settings: LoadSettings, tokenizer: Tokenizer, rng: random.Random) -> list[Prompt]:
        prefix = tokenizer.text_of_length(rng, settings.prefix_len) + " " if settings.prefix_len else ""
        prompts = [
            Prompt.user_text(
                prefix + tokenizer.text_of_length(rng, _lengths(rng, settings.input_len, settings.range_ratio)),
                _lengths(rng, output_len(settings), settings.range_ratio),
            )
            for _ in range(settings.dataset_size)
        ]
        return prompts

    def shared_prefix(self, settings: LoadSettings) -> SharedPrefix | None:
        return SharedPrefix(settings.prefix_len, 1) if settings.prefix_len else None


class RandomImages(Random):
    name, summary = "random-mm", "random token prompts with synthetic images of a set size (chat)"

    def check(self, settings: LoadSettings) -> LoadSettings:
        if settings.endpoint != "chat":
            raise DatasetError("random-mm sends images in chat messages: it needs --endpoint chat")
        return settings

    def make(self, settings: LoadSettings, tokenizer: Tokenizer | None, rng: random.Random,
             offered: list[dict] | None) -> Workload | Sessions | Trace:
        text = super().make(settings, tokenizer, rng, offered)
        assert isinstance(text, Cycle)
        return ImagePrompts(text, settings.images_per_request, image_size(settings.image_size), settings.seed)


class PrefixRepetition(TokenPrompts):
    name, summary = "prefix-repetition", "a few shared prefixes, each with unique suffixes"

    def prompts(self, settings: LoadSettings, tokenizer: Tokenizer, rng: random.Random) -> list[Prompt]:
        prefixes = [tokenizer.text_of_length(rng, settings.prefix_len or 256) for _ in range(settings.num_prefixes)]
        prompts = [replace(Prompt.user_text(f"{prefix} {tokenizer.text_of_length(rng, settings.suffix_len)}",
                                            output_len(settings)), prefix=index)
                   for index, prefix in enumerate(prefixes)
                   for _ in range(max(1, settings.dataset_size // settings.num_prefixes))]
        rng.shuffle(prompts)
        return prompts

    def shared_prefix(self, settings: LoadSettings) -> SharedPrefix | None:
        return SharedPrefix(settings.prefix_len or 256, settings.num_prefixes)


class Agent(Dataset):
    """The seeds' agent session: the whole conversation up to its last user turn, replayed, with a
    date-time at the very start of the first turn; the same one every time (`static`, all of it is
    a cacheable prefix) or a new one per request (`dynamic`, nothing after it can be cached)."""

    name, summary = "agent", "a long sample conversation with a date-time prefix"
    sample = SAMPLES / "agent-conversation.json"

    def check(self, settings: LoadSettings) -> LoadSettings:
        read_sharegpt(self.path(settings))
        return settings

    def make(self, settings: LoadSettings, tokenizer: Tokenizer | None, rng: random.Random,
             offered: list[dict] | None) -> Workload | Sessions | Trace:
        messages = read_sharegpt(self.path(settings))[0]
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


class Jsonl(Dataset):
    name, summary, sample = "jsonl", "JSON Lines of prompts (GuideLLM's and AIPerf's files too)", \
        SAMPLES / "prompts.jsonl"

    def check(self, settings: LoadSettings) -> LoadSettings:
        read_prompts(self.path(settings), settings.dataset_format)
        return settings

    def make(self, settings: LoadSettings, tokenizer: Tokenizer | None, rng: random.Random,
             offered: list[dict] | None) -> Workload | Sessions | Trace:
        prompts, how = read_prompts(self.path(settings), settings.dataset_format)
        log.info("%s", how)
        rng.shuffle(prompts)
        return Cycle(_with_tools(prompts, offered))


def _session_scripts(path: Path, max_tokens: int | None, body: dict | None) -> list[Script]:
    """A file's sessions: JSON Lines of {"turns": [...]}, or ShareGPT conversations (their human turns;
    the recorded answers give way to the model's own)."""
    if path.suffix == ".jsonl" and detect(path) == "aiperf":
        return [Script(None, s["turns"], max_tokens, body) for s in read_aiperf_sessions(path)]
    if path.suffix == ".jsonl":
        return [Script(s["system"], s["turns"], s["max_tokens"] or max_tokens, {**(body or {}), **(s["body"] or {})})
                for s in read_session_lines(path)]
    scripts = []
    for messages in read_sharegpt(path):
        system = "\n".join(m["content"] for m in messages if m["role"] == "system") or None
        scripts.append(Script(system, [m["content"] for m in messages if m["role"] == "user"], max_tokens, body))
    return scripts


class Conversations(Dataset):
    name, tokenized, sample_tools = "sessions", True, True
    summary = "each user a conversation that grows with the model's answers"

    def check(self, settings: LoadSettings) -> LoadSettings:
        if settings.endpoint not in ("chat", "responses"):
            raise DatasetError("sessions are conversations: they need --endpoint chat or responses")
        if settings.request_rate is not None:
            raise DatasetError("sessions are closed loops (each user a conversation, answer then next turn): "
                               "use -u users and --think-time, not --request-rate")
        if settings.dataset_path is not None:
            _session_scripts(settings.dataset_path, None, None)
        return settings

    def make(self, settings: LoadSettings, tokenizer: Tokenizer | None, rng: random.Random,
             offered: list[dict] | None) -> Workload | Sessions | Trace:
        assert tokenizer is not None
        body = {"tools": offered} if offered else None
        static = settings.agent_prefix == "static"
        if settings.dataset_path is None:
            turns = settings.turns or GENERATED_TURNS
            scripts, tool_result, longest_prompt = generated(tokenizer, rng, turns, settings.turn_len,
                                                             settings.system_len, output_len(settings), body)
            return Sessions(scripts, turns, static, tool_result, [longest_prompt], label=True)
        scripts = _session_scripts(settings.dataset_path, output_len(settings), body)
        rng.shuffle(scripts)
        answer = tokenizer.text_of_length(rng, output_len(settings))
        return Sessions(scripts, settings.turns, static, tokenizer.text_of_length(rng, settings.turn_len),
                        [longest(s, answer) for s in scripts], label=False)


class Replay(Dataset):
    name, summary = "trace", "a timestamped trace (Mooncake, Azure, WEKA or OpenTelemetry) replayed at its own times"
    sample, tokenized, timed = SAMPLES / "mooncake-sample.jsonl", True, True

    def check(self, settings: LoadSettings) -> LoadSettings:
        if not streams(settings.endpoint):
            raise DatasetError("a trace replays generation requests: it needs --endpoint chat, completions or "
                               "responses")
        entries = len(read_trace(self.path(settings), settings.trace_format).entries)
        settings = settings.model_copy(update={"num_requests": min(settings.num_requests or entries, entries)})
        given = [name for name, on in (("--request-rate", settings.request_rate), ("--shape", settings.shape),
                                       ("--warmup-requests", settings.warmup_requests),
                                       ("--warmup-seconds", settings.warmup_seconds)) if on]
        if given:
            raise DatasetError(f"a trace sets its own times and sends each entry once: {', '.join(given)} "
                               "cannot go with it (--speedup changes its pace)")
        return settings

    def make(self, settings: LoadSettings, tokenizer: Tokenizer | None, rng: random.Random,
             offered: list[dict] | None) -> Workload | Sessions | Trace:
        assert tokenizer is not None
        return Trace(read_trace(self.path(settings), settings.trace_format), tokenizer, settings.trace_block_tokens,
                     settings.seed)
