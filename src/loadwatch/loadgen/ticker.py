"""Work a Locust process does on its own schedule, beside the users: a greenlet per task."""

from __future__ import annotations

import time
from collections.abc import Callable

import gevent


def every(seconds: float, action: Callable[[], object]) -> gevent.Greenlet:
    """Call `action` every `seconds`, counted from each call's start: a slow call delays the next
    one instead of letting calls pile up."""

    def loop() -> None:
        while True:
            started = time.monotonic()
            action()
            gevent.sleep(max(0.0, seconds - (time.monotonic() - started)))

    return gevent.spawn(loop)
