"""What an answer's head and a refusal's body say beside the stream: which replica a router sent the
request to, when a refusal says to come back, and the human part of its message."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from geventhttpclient.response import HTTPResponse

from loadwatch.client.failures import RequestFailed, http_reason

ERROR_BODY_LIMIT = 64 * 1024  # of a non-200 answer: enough for any error message
# Where a router says which replica it sent a request to: smg names the worker's URL on every answer a
# worker gave, its error statuses passed through included (vllm-router names none), so a fleet's requests,
# failed ones too, are attributed where replicas set no fingerprint. An error smg makes itself (no worker
# answered, none serves the model) carries x-smg-error-code instead, and names no replica.
ROUTED_TO = "x-smg-routed-worker-id"


def first(value: str | list[str] | None) -> str | None:
    """A header's value, the first where it came more than once."""
    return value[0] if isinstance(value, list) else value


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def server_error_message(body: bytes) -> str:
    """The human part of an OpenAI-style error body, or the body itself."""
    text = body.decode("utf-8", "replace").strip()
    try:
        error = json.loads(text)
    except ValueError:
        return text[:300] or "(empty body)"
    if isinstance(error, dict):
        inner = error.get("error", error)
        if isinstance(inner, dict) and "message" in inner:
            return str(inner["message"])[:300]
        if "message" in error:
            return str(error["message"])[:300]
    return text[:300]


def refusal(response: HTTPResponse, body: bytes) -> RequestFailed:
    """An answer other than 200, as the request's failure: its status, the message of what came of its
    body, and the Retry-After it asked for."""
    return RequestFailed(http_reason(response.status_code), server_error_message(body[:ERROR_BODY_LIMIT]),
                         retry_after(first(response.get("retry-after"))))
