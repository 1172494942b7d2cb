"""Which model to ask for when the user did not say: the first one the server lists."""

from __future__ import annotations

import logging

from gevent.lock import Semaphore

from loadwatch.client.failures import RequestFailed
from loadwatch.client.stream import Streamer

log = logging.getLogger(__name__)
UNKNOWN = "unknown"

_lock = Semaphore()
_resolved: dict[str, str | None] = {}


def resolve_model(streamer: Streamer) -> str | None:
    """The server's first model id, looked up once per server and process.

    None when the server cannot say: requests then go without a model field and their own
    failures (connection refused, HTTP 404…) are counted where they belong.
    """
    with _lock:
        if streamer.origin in _resolved:
            return _resolved[streamer.origin]
        model = None
        try:
            listing = streamer.get_json("/v1/models")
            model = listing["data"][0]["id"]  # type: ignore[index]
        except RequestFailed as exc:
            log.error("Cannot list models at %s/v1/models (%s); pass --model to choose one", streamer.origin, exc)
        except (KeyError, IndexError, TypeError):
            log.error("%s/v1/models lists no model; pass --model to choose one", streamer.origin)
        else:
            log.info("Using model %r, the first listed by %s", model, streamer.origin)
        _resolved[streamer.origin] = model
        return model
