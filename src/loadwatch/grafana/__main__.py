"""Write grafana/dashboards/*.json from loadwatch.grafana.dashboards: `python -m loadwatch.grafana`,
run from the checkout's root."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from loadwatch.grafana.dashboards import DASHBOARDS

OUT = Path("grafana", "dashboards")  # in the checkout, from its root


def render(build) -> str:
    return json.dumps(build(), indent=2) + "\n"


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in DASHBOARDS.items():
        (OUT / name).write_text(render(build))
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
