"""Which model to ask for when the user did not say: the first one the server lists; and whether the
models the user named (a LoRA adapter's name among them) are ones it serves."""

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
_served: dict[str, list[str]] = {}  # each server's model ids, once listed


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


def unserved(streamer: Streamer, names: list[str]) -> str | None:
    """Why the run cannot send to `names`: those of them the server's /v1/models does not list (a
    LoRA adapter it was not started with, a typo), in one line; None where it lists them all, or
    where it cannot say (then each request's own failure is counted where it belongs). Listed once
    per server and process: every user of a process asks."""
    with _lock:
        if streamer.origin not in _served:
            try:
                listing = streamer.get_json("/v1/models")
                _served[streamer.origin] = [model["id"] for model in listing["data"]]  # type: ignore[index]
            except (RequestFailed, KeyError, TypeError):
                return None
        served = _served[streamer.origin]
    missing = [name for name in names if name not in served]
    if not missing:
        return None
    return (f"{streamer.origin} serves no model {', '.join(missing)} (its /v1/models lists {', '.join(served)}): "
            "check --model")
