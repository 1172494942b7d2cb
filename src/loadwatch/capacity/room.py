"""How many of the workload's requests the engine has room for: the KV cache, counted in whole
blocks per request at the workload's mean context, and the running batch (--max-num-seqs). Pure.

vLLM allocates a request's KV cache in blocks of `block_size` tokens, so a request of C tokens holds
ceil(C / block_size) of them until it ends; with prefix caching on, the full blocks of a prefix its
prompts share are held once for all. One block of the pool is vLLM's null block, never handed out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from loadwatch.workloads.datasets import SharedPrefix

NULL_BLOCKS = 1
# What room() adds to a diagnosis's evidence: the report says it in a sentence of its own.
KEYS = ("kv_cache_holds_requests", "kv_cache_blocks", "kv_cache_block_size", "mean_context_tokens",
        "blocks_per_request", "shared_prefix_blocks", "max_num_seqs", "max_num_seqs_source")


@dataclass(frozen=True)
class Batch:
    """The running batch's limit and how it is known, in words for the report."""

    max_num_seqs: int
    source: str


def mean_context(results: dict) -> float | None:
    """Prompt plus output tokens of the mean completed request, as the server counted them."""
    completed = results.get("completed") or 0
    prompt, output = results.get("total_input_tokens"), results.get("total_output_tokens")
    if not completed or prompt is None or output is None:
        return None
    return (prompt + output) / completed


def room(results: dict, engine: dict, batch: Batch | None, prefix: SharedPrefix | None) -> dict:
    """{kv_cache_holds_requests, mean_context_tokens, blocks_per_request, shared_prefix_blocks,
    kv_cache_blocks, kv_cache_block_size, max_num_seqs, max_num_seqs_source}, each None where a
    figure it needs is unknown."""
    blocks, block_size = engine.get("kv_cache_blocks"), engine.get("kv_cache_block_size")
    context = mean_context(results)
    out: dict = dict.fromkeys(KEYS)
    out.update(kv_cache_blocks=blocks, kv_cache_block_size=block_size,
               mean_context_tokens=None if context is None else round(context),
               max_num_seqs=batch.max_num_seqs if batch else None, max_num_seqs_source=batch.source if batch else None)
    if not blocks or not block_size or context is None:
        return out
    cached = engine.get("prefix_caching") == 1 and prefix is not None
    per_prefix = prefix.tokens // int(block_size) if cached and prefix else 0
    shared = per_prefix * prefix.distinct if cached and prefix else 0
    per_request = max(1, math.ceil(context / block_size) - per_prefix)
    usable = int(blocks) - NULL_BLOCKS - shared
    out.update(kv_cache_holds_requests=max(0, usable // per_request), blocks_per_request=per_request,
               shared_prefix_blocks=shared)
    return out


def sentence(room: dict) -> str | None:
    """The engine's room in words: "The KV cache holds 4 requests at the workload's mean context ..."."""
    parts = []
    if room["kv_cache_holds_requests"] is not None:
        shared = (f", after the {room['shared_prefix_blocks']} blocks of the shared prefix held once"
                  if room["shared_prefix_blocks"] else "")
        parts.append(f"The KV cache holds {room['kv_cache_holds_requests']} requests at the workload's mean "
                     f"context of {room['mean_context_tokens']} tokens ({room['kv_cache_blocks']:.0f} blocks of "
                     f"{room['kv_cache_block_size']:.0f} tokens, {room['blocks_per_request']} a request{shared})")
    if room["max_num_seqs"] is not None:
        parts.append(f"the batch allows {room['max_num_seqs']} (--max-num-seqs, {room['max_num_seqs_source']})")
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."
