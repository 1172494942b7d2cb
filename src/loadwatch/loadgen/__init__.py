"""Locust integration: importing this package registers loadwatch's options and listeners."""

from loadwatch.loadgen import plugin as _plugin  # noqa: F401  (registers event listeners)
from loadwatch.loadgen.sending.user import LLMUser

__all__ = ["LLMUser"]
