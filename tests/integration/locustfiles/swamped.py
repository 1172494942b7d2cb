"""The chat scenario beside a greenlet that holds the event loop 99 % of the time, by the clock (not
by a count of operations, which a faster machine would get through sooner): 10 ms a second is left
for everything else, too little for any open loop of hundreds of arrivals a second to keep up."""

import time

import gevent
from locust import events

from loadwatch.loadgen import LLMUser


class Chat(LLMUser):
    scenario = "chat"


def hog() -> None:
    while True:
        until = time.perf_counter() + 0.99
        while time.perf_counter() < until:
            pass
        gevent.sleep(0.01)


@events.test_start.add_listener
def start_hogging(environment, **_kwargs) -> None:
    hogging = gevent.spawn(hog)
    environment.events.test_stop.add_listener(lambda **_: hogging.kill(block=False))
