"""The embedded engine embeds for embeddings and rerank runs, generates otherwise, and never both."""

import pytest

from loadwatch.engine.serving import POOLING_ARGS, endpoint_of, engine_args


def test_the_endpoint_is_read_from_the_load_generators_options():
    assert endpoint_of(["-u", "2", "--endpoint", "rerank"]) == "rerank"
    assert endpoint_of(["--endpoint=embeddings", "--dataset", "random"]) == "embeddings"
    assert endpoint_of(["--max-tokens", "8"]) == "chat"


def test_pooling_endpoints_get_a_pooling_engine_and_the_users_runner_wins():
    assert engine_args(["--max-num-seqs", "4"], {"embeddings", "rerank"}) == ["--max-num-seqs", "4", *POOLING_ARGS]
    assert engine_args([], {"chat", "responses"}) == []
    assert engine_args(["--runner", "pooling"], {"rerank"}) == ["--runner", "pooling"]
    with pytest.raises(ValueError, match="cannot both generate and embed"):
        engine_args([], {"chat", "embeddings"})
