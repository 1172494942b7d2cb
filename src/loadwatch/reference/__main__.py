"""Write docs/reference/*.md: `python -m loadwatch.reference`, run from the checkout's root."""

from __future__ import annotations

import sys
from pathlib import Path

import loadwatch.loadgen  # noqa: F401  Locust first: its gevent patches ssl before the pages' imports load it
from loadwatch.reference.pages import PAGES

OUT = Path("docs", "reference")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, page in PAGES.items():
        (OUT / name).write_text(page())
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
