"""Write prometheus/rules/recording.yml and alerts.yml: `python -m loadwatch.rules [--runbook-url-base URL]`,
run from the checkout's root. A test fails when either file drifts from its generator."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loadwatch.rules import alerts, recording

OUT = Path("prometheus", "rules")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadwatch.rules", description=__doc__)
    parser.add_argument("--runbook-url-base", default=None,
                        help=f"where docs/runbooks.md is published; default ${alerts.RUNBOOK_BASE_ENV} or "
                             f"{alerts.DEFAULT_RUNBOOK_BASE}")
    args = parser.parse_args(argv)
    for name, text in (("recording.yml", recording.render()), ("alerts.yml", alerts.render(args.runbook_url_base))):
        (OUT / name).write_text(text)
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
