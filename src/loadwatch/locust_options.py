"""loadwatch's Locust options in their command-line form, from the fields of LoadSettings, without
Locust: Locust's parser takes them from here (loadgen/options.py), and `loadwatch options` and the
reference page list them (importing Locust there, after ssl, would fail: gevent must patch first).
"""

from __future__ import annotations

import argparse
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic.fields import FieldInfo

from loadwatch.metrics.slo import Objective, parse_slo
from loadwatch.model_options import without_none
from loadwatch.settings import OPTION_GROUPS, LoadSettings
from loadwatch.workloads.datasets import DATASETS


def _slo_text(text: str) -> str:
    # Kept as text: Locust ships custom options to workers with msgpack.
    try:
        parse_slo(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def argument(name: str, field: FieldInfo) -> tuple[str, dict[str, Any]]:
    """The flag and the keyword arguments of Locust's add_argument for one settings field."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    meta: dict[str, Any] = dict(extra.get("cli") or {})  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {
        "help": field.description,
        "env_var": meta.get("env") or f"LOCUST_{name.upper()}",
        "default": field.default,
    }
    if not meta.get("web_ui", True):
        kwargs["include_in_web_ui"] = False
    kind = without_none(field.annotation)
    if name == "dataset":
        kwargs.update(choices=list(DATASETS), help=f"{field.description}: " + "; ".join(
            f"{d.name}, {d.summary}" + (" (a sample file unless --dataset-path)" if d.sample else "")
            for d in DATASETS.values()))
    elif typing.get_origin(kind) is Literal:
        kwargs["choices"] = list(typing.get_args(kind))
    elif kind is bool:
        kwargs["action"] = "store_true"
    elif kind in (int, float):
        kwargs["type"] = kind
    elif kind == list[Objective]:
        # default None, not []: the web UI turns a list option back into ints.
        kwargs.update(type=_slo_text, action="append", default=None)
    elif kind == list[str]:
        kwargs.update(action="append", default=None)  # repeatable; a value may hold commas
    elif typing.get_origin(kind) is list:
        kwargs["default"] = None  # given as one comma-separated string
    elif typing.get_origin(kind) is dict:
        kwargs["default"] = None  # given as JSON text: Locust ships options to workers with msgpack
    elif kind not in (str, Path):
        raise TypeError(f"LoadSettings.{name}: no command-line form for {kind}")
    return "--" + name.replace("_", "-"), kwargs


def grouped() -> dict[str, list[tuple[str, FieldInfo]]]:
    """LoadSettings' fields by their group (settings.OPTION_GROUPS), in their order."""
    groups: dict[str, list[tuple[str, FieldInfo]]] = {}
    group = next(iter(OPTION_GROUPS.values()))
    for name, field in LoadSettings.model_fields.items():
        group = OPTION_GROUPS.get(name, group)
        groups.setdefault(group, []).append((name, field))
    return groups


def options_help(width: int | None = None) -> str:
    """loadwatch's Locust options as `--help` would list them, grouped, each with its default and its
    environment variable: Locust prints its help before it loads a locustfile, so `locust -f FILE
    --help` cannot show them, and `loadwatch options` does."""
    parser = argparse.ArgumentParser(
        prog="locust", usage="locust -f LOCUSTFILE [Locust's options] [loadwatch's options below]", add_help=False,
        formatter_class=lambda prog: argparse.HelpFormatter(prog, max_help_position=32, width=width),
        description="loadwatch's options for Locust, after Locust's own (-u, -r, -t, --processes, --headless: "
                    "`locust --help`). Each is also an environment variable and a line of locust.conf.")
    for group, fields in grouped().items():
        section = parser.add_argument_group(group)
        for name, field in fields:
            flag, kwargs = argument(name, field)
            env, default = kwargs.pop("env_var"), field.default
            kwargs.pop("include_in_web_ui", None)
            shown = "" if default in (None, "", [], {}, False) else f"; default {default}"
            kwargs["help"] = (kwargs.get("help") or "").replace("%", "%%") + f" (${env}{shown})"
            kwargs.pop("default", None)
            section.add_argument(flag, **kwargs)
    return parser.format_help()


