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


class RequestFailed(Exception):
    """A request that finished without a usable completion."""

    def __init__(self, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.retry_after = retry_after  # seconds, from a 429 or 503's Retry-After
