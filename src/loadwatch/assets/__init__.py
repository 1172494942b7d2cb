"""The stack's configs, dashboards, locustfiles and experiments, shipped inside the package.

In a checkout, prometheus/, grafana/, locustfiles/ and experiments/ here are links to the top-level folders
(the one copy people edit); a wheel carries their files, so an installed loadwatch finds them
wherever it runs.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def path(*parts: str) -> Path:
    """A shipped file or folder, e.g. path("prometheus", "rules"); installs unpack to disk, so a Path."""
    return Path(str(files(__name__).joinpath(*parts)))


def locustfile(name: str = "chat") -> Path:
    return path("locustfiles", f"{name}.py")


def experiment(name: str) -> Path:
    return path("experiments", f"{name}.yaml")
