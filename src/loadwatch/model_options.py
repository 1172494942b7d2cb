"""argparse options generated from a pydantic model's fields, as the Locust options are generated
from LoadSettings (`loadgen/options.py`, on Locust's own parser): the flag is the field's name, the
help its description with its default, choices its Literal. The model validates what was given."""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ValidationError

M = TypeVar("M", bound=BaseModel)


def without_none(annotation: Any) -> Any:
    """`float | None` as float: an option that may be left out takes the value's own form."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def add_model_options(parser: argparse.ArgumentParser, model: type[BaseModel],
                      only: tuple[str, ...] | None = None, required: tuple[str, ...] = ()) -> None:
    """Every field (or those named in `only`) as `--name-with-dashes`, its value left as text for the
    model to check (a duration is `30s`); unset options stay None and the model's default applies.
    `required`: fields this command cannot go without, though the model (shared) has a default."""
    for name, info in model.model_fields.items():
        if only is not None and name not in only:
            continue
        kind = without_none(info.annotation)
        kwargs: dict[str, Any] = {"default": None, "dest": name, "required": name in required}
        if typing.get_origin(kind) is Literal:
            kwargs["choices"] = list(typing.get_args(kind))
        if typing.get_origin(kind) is list:  # repeatable
            kwargs["action"] = "append"
        # A duration's default in seconds, as `30s`: the form the option takes.
        unit = "s" if any(isinstance(m, BeforeValidator) for m in info.metadata) else ""
        value = None if info.default_factory else info.default  # a factory's: its description says what it is
        default = "" if value in (None, []) else f" (default {value:g}{unit})" \
            if isinstance(value, float) else f" (default {value})"
        kwargs["help"] = f"{info.description or ''}{default}"
        parser.add_argument("--" + name.replace("_", "-"), **kwargs)


def model_from_args(model: type[M], args: argparse.Namespace, **parsed: object) -> M:
    """The model from the options given; ValueError naming each bad option as its flag. `parsed`: fields
    the command parsed itself, checked with the rest."""
    given = {name: getattr(args, name) for name in model.model_fields if getattr(args, name, None) is not None}
    given |= parsed
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        # A check of several options together has no one option to name.
        raise ValueError("; ".join((f"--{str(e['loc'][0]).replace('_', '-')}: " if e["loc"] else "")
                                   + e["msg"].removeprefix("Value error, ") for e in exc.errors())) from None
