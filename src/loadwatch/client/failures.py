"""Why a request failed: one reason per failed request, used as the `reason` label."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    CONNECTION = "connection"
    TIMEOUT = "timeout"
    STREAM_CUT = "stream_cut"
    MALFORMED_CHUNK = "malformed_chunk"
    EMPTY_COMPLETION = "empty_completion"
    # An embeddings or rerank answer that is not JSON, or does not answer each input.
    MALFORMED_ANSWER = "malformed_answer"
    # The server reported an error inside a 200 stream (vLLM sends `data: {"error": ...}`).
    STREAM_ERROR = "stream_error"
    # Anything else that went wrong in the load generator while sending or reading: the request is
    # still counted once, and the exception named in the log.
    CLIENT_ERROR = "client_error"


def http_reason(status: int) -> str:
    return f"http_{status}"


class Rejection(StrEnum):
    """Why admission control refused a request: vLLM's reasons, as its `vllm:admission_rejections`
    counter labels them."""

    QUEUED_REQUESTS = "max_num_queued_reqs"
    QUEUED_TOKENS = "max_num_queued_tokens"


# The first sentence of each refusal vLLM sends (vllm/exceptions.py: QueueOverflowError,
# MaxQueuedTokensError), in a 503's error body or in an error event of a stream that had answered 200.
# Recognised by its words alone: a 503 that names no admission limit (a proxy's, an engine that is
# down or asleep) stays the failure http_503, since nothing says the server chose to refuse.
_REFUSALS = {
    "The engine is currently busy and cannot accept new requests": Rejection.QUEUED_REQUESTS,
    "The engine has reached its prefill token backlog limit": Rejection.QUEUED_TOKENS,
}


def rejection_of(reason: str, message: str) -> Rejection | None:
    """The admission limit a failure's answer names, where it is vLLM's refusal: a 503, or an error
    event in a stream (whose status was 200 already, so the words alone say it)."""
    if reason not in (http_reason(503), Reason.STREAM_ERROR):
        return None
    return next((why for words, why in _REFUSALS.items() if words in message), None)


class RequestFailed(Exception):
    """A request that finished without a usable completion."""

    def __init__(self, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.retry_after = retry_after  # seconds, from a 429 or 503's Retry-After
        # Where the server refused it at admission: why (then the request is rejected, not failed).
        self.rejection = rejection_of(reason, message)
