"""Appended to a real locustfile given to a worker, it writes down everything its master sends: what a
stranger who reaches the master's port 5557 would receive."""

import json
import os

from locust import events


@events.test_start.add_listener
def keep_what_the_master_sent(environment, **_kwargs):
    with open(os.environ["ROGUE_DUMP"], "w") as out:
        json.dump({"host": environment.host, "options": vars(environment.parsed_options)}, out, default=str)
