"""loadwatch's options on Locust's own parser, generated from the fields of LoadSettings.

Locust's parser gives each option a command-line flag, a LOCUST_* environment variable, a line in
locust.conf and (unless hidden) a web-UI field; LoadSettings then validates what it found.
"""

from __future__ import annotations

import argparse
import os
import sys
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from locust.argument_parser import LocustArgumentParser
from pydantic.fields import FieldInfo

from loadwatch.credentials import refused_on_command_line
from loadwatch.defaults import LOOPBACK
from loadwatch.loadgen.cores import accept_auto
from loadwatch.metrics.slo import SLO, parse_slo
from loadwatch.model_options import without_none
from loadwatch.processes import port_or_free
from loadwatch.settings import LoadSettings
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
    elif kind == list[SLO]:
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


def add_options(parser: LocustArgumentParser, **_kwargs) -> None:
    # Locust's own add_argument, never a group's: only it knows the web UI fields.
    for name, field in LoadSettings.model_fields.items():
        flag, kwargs = argument(name, field)
        parser.add_argument(flag, **kwargs)
    parser.add_argument("--api-key", help=argparse.SUPPRESS, include_in_web_ui=False,
                        action=refused_on_command_line("Put the key in $OPENAI_API_KEY, or in a file named by "
                                                       "--api-key-file or $OPENAI_API_KEY_FILE."))
    accept_auto(parser, worker=given("--worker", sys.argv[1:], os.environ))
    # Nothing listens beyond this machine unless asked: Locust's own defaults are all interfaces.
    parser.set_defaults(web_host=LOOPBACK, master_bind_host=LOOPBACK)
    if spawns_own_workers(sys.argv[1:], os.environ):
        port = port_or_free()
        parser.set_defaults(master_bind_port=port, master_port=port)


def given(flag: str, argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    env = "LOCUST_" + flag.removeprefix("--").replace("-", "_").upper()
    return any(a == flag or a.startswith(flag + "=") for a in argv) or bool(environ.get(env))


def spawns_own_workers(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether this is a master that forks its own workers (--processes, not --worker) on a port
    nobody named: it then takes a free port rather than Locust's 5557, where a second run on the host
    failed to bind with a traceback while its workers joined the first run's master."""
    return (given("--processes", argv, environ) and not given("--worker", argv, environ)
            and not given("--master-bind-port", argv, environ) and not given("--master-port", argv, environ))
