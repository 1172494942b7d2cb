"""Secrets come from a process's own environment or a file, never from its command line (which
`ps` shows to every user of the machine); URLs are shown and stored without their credentials."""

from __future__ import annotations

import argparse
import base64
import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

REDACTED = "***"
# Secrets loadwatch reads from the environment: a server it starts (Prometheus, the sidecar, ...)
# gets none of them unless it is handed one on purpose.
SECRET_VARIABLES = frozenset({"OPENAI_API_KEY", "VLLM_API_KEY", "GRAFANA_TOKEN", "LOADWATCH_WEB_PASSWORD"})


class CredentialError(ValueError):
    """A secret named to be read cannot be: the message says where it was looked for."""


def read_secret(name: str, file: Path | None = None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The secret `name` of this process: the content of `file`, else of the file $<name>_FILE names,
    else $<name>; None when none is set. Surrounding whitespace (the file's newline) is not part of it."""
    file = file or (Path(environ[f"{name}_FILE"]) if environ.get(f"{name}_FILE") else None)
    if file is None:
        return environ.get(name) or None
    try:
        value = file.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a text file"
        raise CredentialError(f"cannot read the {name} file {file}: {reason}") from None
    if not value:
        raise CredentialError(f"the {name} file {file} is empty")
    return value


def _without_userinfo(parts: SplitResult) -> SplitResult:
    return parts._replace(netloc=parts.netloc.rpartition("@")[2])


def redact_url(url: str) -> str:
    """`url` as it may be shown, logged or stored: user and password replaced by ***."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=f"{REDACTED}@{_without_userinfo(parts).netloc}"))


def split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without user and password, and the HTTP Basic Authorization value they make (or None)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    # Percent-escapes decoded, as browsers and requests do: p%40ss is the password p@ss.
    userinfo = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    token = base64.b64encode(userinfo.encode()).decode()
    return urlunsplit(_without_userinfo(parts)), f"Basic {token}"


def authorization(api_key: str | None, url_credentials: str | None) -> str | None:
    """The Authorization header of every request: the API key as a bearer token, else the URL's user."""
    return f"Bearer {api_key}" if api_key else url_credentials


def refused_on_command_line(instead: str) -> type[argparse.Action]:
    """An argparse action for a secret's old flag: it stops with a message saying where it goes instead."""

    class Refused(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            parser.error(f"{option_string} is refused: a secret on the command line is visible to every "
                         f"user of the machine (ps, /proc). {instead}")

    return Refused
