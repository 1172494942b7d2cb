"""Files that a reader sees whole or not at all: results, reports and state files.

Written beside their place and renamed over it, so a run killed mid-write leaves the last good
file, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
