"""Write prometheus/rules/recording.yml: `python -m loadwatch.rules`, run from the checkout's root.
A test fails when the file drifts from its generator."""

from __future__ import annotations

import sys
from pathlib import Path

from loadwatch.rules.recording import render

OUT = Path("prometheus", "rules", "recording.yml")


def main() -> int:
    OUT.write_text(render())
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
