"""The chat scenario beside a greenlet that holds the event loop 60 ms at a time, by the clock, then
lets it go for 10 ms: a load generator that cannot keep up, as an overloaded machine makes it.

By the clock, not by a count of operations: a sum that took 60 ms on one machine took 42 ms on a
faster one, where the monitor's 100 ms probe fell into step with the hog's 52 ms cycle and woke
4 ms late every time, and the run was never called saturated."""

import time

import gevent
from locust import events

from loadwatch.loadgen import LLMUser


class Chat(LLMUser):
    scenario = "chat"


def hog() -> None:
    while True:
        until = time.perf_counter() + 0.06
        while time.perf_counter() < until:
            pass
        gevent.sleep(0.01)


@events.test_start.add_listener
def start_hogging(**_kwargs) -> None:
    gevent.spawn(hog)
