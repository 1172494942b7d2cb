"""Before the load: does the workload fit the server's context? vLLM refuses (HTTP 400) any
request whose prompt plus max_tokens is over its max_model_len, and a run of nothing but
refusals says nothing about the server; better to stop before it starts, saying why."""

from __future__ import annotations

import logging

from loadwatch.client.failures import RequestFailed
from loadwatch.client.stream import Streamer
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.prompt import Prompt
from loadwatch.workloads.trace import Trace

log = logging.getLogger(__name__)

LONGEST = 3  # prompts measured: the longest by characters (a few, as token and character lengths differ)


def _measure(streamer: Streamer, model: str | None, prompt: Prompt, chat: bool) -> tuple[int, int] | None:
    """(prompt tokens, max_model_len) from vLLM's /tokenize; None where the server has no such answer."""
    payload: dict = {"messages": list(prompt.messages), "add_generation_prompt": True} if chat else \
        {"prompt": prompt.text}
    if model:
        payload["model"] = model
    try:
        answer = streamer.post_json("/tokenize", payload)
    except RequestFailed:
        return None
    count, limit = answer.get("count"), answer.get("max_model_len")
    return (count, limit) if isinstance(count, int) and isinstance(limit, int) else None


def check_context(streamer: Streamer, model: str | None, prompts: list[Prompt], default_max_tokens: int,
                  chat: bool, dataset: str) -> None:
    """DatasetError naming the dataset, its longest prompt and the limit when a request cannot fit."""
    longest = sorted(prompts, key=lambda p: sum(len(str(m.get("content", ""))) for m in p.messages))[-LONGEST:]
    for prompt in reversed(longest):
        measured = _measure(streamer, model, prompt, chat)
        if measured is None:
            return  # not vLLM, or an old one: the server will say so itself
        tokens, limit = measured
        wanted = tokens + (prompt.max_tokens or default_max_tokens)
        if wanted > limit:
            raise DatasetError(
                f"the {dataset} workload cannot fit the server's context: its longest prompt is {tokens} tokens, "
                f"plus max_tokens {prompt.max_tokens or default_max_tokens} makes {wanted}, over the server's "
                f"max_model_len of {limit}; use a shorter workload or lower --max-tokens/--output-len, or serve "
                "the model with a larger --max-model-len")


def fit_trace(streamer: Streamer, model: str | None, trace: Trace, sent: int, chat: bool, refuse: bool) -> None:
    """Skip the entries, of the first `sent` (those this run sends), that cannot fit the server's
    context, and name them in one line; or refuse the trace (DatasetError). A trace spans a day of
    requests of every length: one too long for a 32k model is no reason to replay none of them.

    The entries' lengths are the trace's own, plus the tokens the chat template adds, measured on
    the first entry; an entry of its own messages (a span's) is measured whole.
    """
    first = trace.prompt(0)
    measured = _measure(streamer, model, first, chat)
    if measured is None:
        return  # not vLLM, or an old one: the server will refuse what it cannot take, each counted
    tokens, limit = measured
    overhead = max(0, tokens - trace.entries[0].input_length) if trace.entries[0].messages is None else 0
    too_long = []
    for i, entry in enumerate(trace.entries[:sent]):
        if entry.messages is None:
            length = entry.input_length + overhead
        else:  # its own text, measured whole (the first one already is)
            length = tokens if i == 0 else (_measure(streamer, model, trace.prompt(i), chat) or (tokens, limit))[0]
        if length + entry.output_length > limit:
            too_long.append((i, length))
    if not too_long:
        return
    named = ", ".join(f"{trace.entries[i].where} ({length} + {trace.entries[i].output_length} tokens)"
                      for i, length in too_long[:3]) + (", ..." if len(too_long) > 3 else "")
    what = (f"{len(too_long)} of the {sent} entries of {trace.path} this run sends cannot fit the server's "
            f"max_model_len of {limit}")
    if refuse:
        raise DatasetError(f"{what}: {named}; --trace-too-long skip sends the others")
    trace.skipped = {i for i, _ in too_long}
    log.warning("%s and are skipped, counted in the results: %s; --trace-too-long refuse refuses such a trace",
                what, named)
