"""The chat scenario with grafana-client's HTTP stack (niquests, urllib3-future) loaded beside it."""

import grafana_client  # noqa: F401 -- the worst case for timing: its HTTP stack in the measuring process

from loadwatch.loadgen import LLMUser


class Chat(LLMUser):
    scenario = "chat"
