"""What the embedded engine serves for a run: generation, or pooling for embeddings and rerank.

A vLLM instance runs one kind of model: a generating one streams completions, a pooling one answers
/v1/embeddings and the score APIs. vLLM turns the tiny generating model into an embedding model
(`--convert embed`, its last token's hidden state as the vector), and serves /rerank from it as a
bi-encoder (the cosine of the query's and each document's vectors), so one locally built model
serves every endpoint loadwatch sends to, with no second model to build.
"""

from __future__ import annotations

import argparse

from loadwatch.client.endpoints import POOLING

POOLING_ARGS = ("--runner", "pooling", "--convert", "embed")


def endpoint_of(locust_args: list[str]) -> str:
    """The --endpoint among the load generator's options (chat when none is given)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--endpoint", default="chat")
    return parser.parse_known_args(locust_args)[0].endpoint


def engine_args(vllm_args: list[str], endpoints: set[str]) -> list[str]:
    """The embedded engine's flags for a run that sends to `endpoints`: pooling ones added where
    they are all embeddings or rerank; ValueError where generation and pooling are mixed."""
    pooled = {endpoint in POOLING for endpoint in endpoints}
    if pooled == {True, False}:
        raise ValueError("one engine cannot both generate and embed: run the embeddings or rerank workloads "
                         "in an experiment of their own")
    if pooled != {True} or "--runner" in " ".join(vllm_args):
        return vllm_args
    return [*vllm_args, *POOLING_ARGS]
