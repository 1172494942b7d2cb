"""A refusal by vLLM's admission control (--max-num-queued-reqs, --max-num-queued-tokens) is told
from a failure by its words: in a 503's error body, or in the error event of a stream that had
answered 200 already. The answers are vLLM 0.32's (vllm/exceptions.py: QueueOverflowError,
MaxQueuedTokensError, as create_error_response writes them), read through a socket pair: no process."""

from __future__ import annotations

import json

import pytest

from loadwatch.client.failures import Rejection, RequestFailed, rejection_of
from tests.unit.client.test_routed_failures import CHUNK, answer, streamed

BUSY = ("The engine is currently busy and cannot accept new requests. Please try again later or on a different "
        "instance.")
BACKLOG = ("The engine has reached its prefill token backlog limit. Please try again later or on a different "
           "instance.")


def error_body(message: str, status: int = 503) -> bytes:
    return json.dumps({"error": {"message": message, "type": "Service Unavailable", "param": None,
                                 "code": status}}).encode()


def error_event(message: str) -> bytes:
    return CHUNK + b"data: " + error_body(message) + b"\n\ndata: [DONE]\n\n"


@pytest.mark.parametrize(("message", "why"), [(BUSY, Rejection.QUEUED_REQUESTS), (BACKLOG, Rejection.QUEUED_TOKENS)],
                         ids=["queued-reqs", "queued-tokens"])
def test_vllms_503_refusal_is_a_rejection_with_the_limit_it_names(message, why):
    result = streamed(answer("503 Service Unavailable", {}, error_body(message)))
    assert result.failure is not None and result.failure.reason == "http_503"
    assert result.failure.rejection == why and result.timing is None


@pytest.mark.parametrize(("message", "why"), [(BUSY, Rejection.QUEUED_REQUESTS), (BACKLOG, Rejection.QUEUED_TOKENS)],
                         ids=["queued-reqs", "queued-tokens"])
def test_a_refusal_in_the_error_event_of_a_stream_that_answered_200_is_a_rejection(message, why):
    result = streamed(answer("200 OK", {"content-type": "text/event-stream"}, error_event(message)))
    assert result.failure is not None and result.failure.reason == "stream_error"
    assert result.failure.rejection == why


@pytest.mark.parametrize("raw", [
    answer("503 Service Unavailable", {}, error_body("no healthy upstream")),  # a proxy's 503
    answer("503 Service Unavailable", {}, b"Service Unavailable"),  # not even JSON
    answer("500 Internal Server Error", {}, error_body(BUSY, 500)),  # the words, not the status
    answer("200 OK", {"content-type": "text/event-stream"}, error_event("EngineCore encountered an issue")),
], ids=["proxy-503", "plain-503", "500-with-the-words", "other-stream-error"])
def test_an_error_that_names_no_admission_limit_stays_a_failure(raw):
    result = streamed(raw)
    assert result.failure is not None and result.failure.rejection is None


def test_only_a_503_or_a_stream_error_is_read_for_the_words():
    assert rejection_of("http_503", BUSY) == Rejection.QUEUED_REQUESTS
    assert rejection_of("timeout", BUSY) is None
    assert RequestFailed("http_503", BACKLOG).rejection == Rejection.QUEUED_TOKENS
