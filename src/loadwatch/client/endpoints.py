"""The OpenAI-compatible APIs loadwatch streams from: the option's choices and their URL paths."""

from __future__ import annotations

from typing import Literal

Endpoint = Literal["chat", "completions", "responses"]
PATHS: dict[Endpoint, str] = {"chat": "/v1/chat/completions", "completions": "/v1/completions",
                              "responses": "/v1/responses"}
