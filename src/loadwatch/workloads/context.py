"""Before the load: does the workload fit the server's context? vLLM refuses (HTTP 400) any
request whose prompt plus max_tokens is over its max_model_len, and a run of nothing but
refusals says nothing about the server; better to stop before it starts, saying why."""

from __future__ import annotations

from loadwatch.client.failures import RequestFailed
from loadwatch.client.stream import Streamer
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.prompt import Prompt

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
