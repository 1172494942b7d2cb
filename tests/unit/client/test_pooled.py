"""An embeddings or rerank answer must answer every input to count, and its usage gives the tokens."""

import pytest

from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.client.pooled import inputs_of, prompt_tokens


def test_the_inputs_are_the_texts_or_the_documents():
    assert inputs_of("embeddings", {"input": ["a", "b", "c"]}) == 3
    assert inputs_of("rerank", {"query": "q", "documents": ["a", "b"]}) == 2
    assert inputs_of("embeddings", {"input": "one text"}) == 1


def test_an_answer_for_every_input_gives_its_prompt_tokens():
    assert prompt_tokens("embeddings", b'{"data": [{"embedding": [0.1]}, {"embedding": [0.2]}], '
                                       b'"usage": {"prompt_tokens": 7}}', 2) == 7
    assert prompt_tokens("rerank", b'{"results": [{"index": 0, "relevance_score": 0.3}]}', 1) is None  # no usage


@pytest.mark.parametrize("body, why", [
    (b"<html>oops</html>", "not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"data": [{"embedding": [0.1]}]}', "has 1 data for 2 inputs"),
    (b'{"choices": []}', "has no data for 2 inputs"),
])
def test_an_answer_that_does_not_answer_every_input_fails_the_request(body, why):
    with pytest.raises(RequestFailed, match=why) as failed:
        prompt_tokens("embeddings", body, 2)
    assert failed.value.reason == Reason.MALFORMED_ANSWER
