"""Why a request failed: one reason per failed request, used as the `reason` label."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    CONNECTION = "connection"
    TIMEOUT = "timeout"
    STREAM_CUT = "stream_cut"
    MALFORMED_CHUNK = "malformed_chunk"
    EMPTY_COMPLETION = "empty_completion"
    # The server reported an error inside a 200 stream (vLLM sends `data: {"error": ...}`).
    STREAM_ERROR = "stream_error"


def http_reason(status: int) -> str:
    return f"http_{status}"


class RequestFailed(Exception):
    """A request that finished without a usable completion."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
