"""Which model to ask for when the user did not say: the first one the server lists."""

from __future__ import annotations

import logging
import time

from gevent.lock import Semaphore

from loadwatch.client.failures import RequestFailed
from loadwatch.client.stream import Streamer

log = logging.getLogger(__name__)
UNKNOWN = "unknown"

_lock = Semaphore()
_resolved: dict[str, str] = {}
_failed_at: dict[str, float] = {}  # when the last lookup of a server failed


def resolve_model(streamer: Streamer) -> str | None:
    """The server's first model id, looked up once per server and process once it is known.

    None when the server cannot say yet: requests then go without a model field and their own
    failures (connection refused, HTTP 404…) are counted where they belong, and the next call looks
    again. A failure is never kept: Locust started before vLLM had loaded its model would otherwise
    label every series "unknown" for the process's life. Callers that queued behind a lookup that
    just failed take its answer instead of asking again at once.
    """
    asked = time.monotonic()
    with _lock:
        if streamer.origin in _resolved:
            return _resolved[streamer.origin]
        if _failed_at.get(streamer.origin, -1.0) >= asked:
            return None
        model, problem = None, ""
        try:
            listing = streamer.get_json("/v1/models")
            model = listing["data"][0]["id"]  # type: ignore[index]
        except RequestFailed as exc:
            problem = f"Cannot list models at {streamer.origin}/v1/models ({exc})"
        except (KeyError, IndexError, TypeError):
            problem = f"{streamer.origin}/v1/models lists no model"
        if model is None:
            if streamer.origin not in _failed_at:  # once: every request asks again until it answers
                log.error("%s; pass --model to choose one (asked again until the server answers)", problem)
            _failed_at[streamer.origin] = time.monotonic()
        else:
            log.info("Using model %r, the first listed by %s", model, streamer.origin)
            _resolved[streamer.origin] = model
        return model
