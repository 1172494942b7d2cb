"""Durations as people write them (`30s`, `2m`, `500ms`): one parser for the command line, the
experiment file and the capacity options."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> float:
    """Prometheus-style `5s`, `1m` as seconds; a bare number is seconds."""
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * UNITS[unit]
    return float(text)


def _seconds(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError:
            raise ValueError(f"not a duration: {value!r} (e.g. 40s, 2m)") from None
    return value


Seconds = Annotated[float, BeforeValidator(_seconds)]  # a model field given as `40s` or 40
