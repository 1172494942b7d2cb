"""The chat scenario beside a greenlet that holds the event loop some 60 ms at a time: a load
generator that cannot keep up, as an overloaded machine makes it."""

import gevent
from locust import events

from loadwatch.loadgen import LLMUser


class Chat(LLMUser):
    scenario = "chat"


def hog() -> None:
    while True:
        sum(range(4_000_000))  # ~60 ms without yielding
        gevent.sleep(0.01)


@events.test_start.add_listener
def start_hogging(**_kwargs) -> None:
    gevent.spawn(hog)
