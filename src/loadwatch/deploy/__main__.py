"""Write deploy/kubernetes/components/prometheus-operator/generated/ from prometheus/rules and grafana/dashboards:
`python -m loadwatch.deploy`, run from the checkout's root. A test fails when the files drift from their sources."""

from __future__ import annotations

import sys

from loadwatch.deploy.kubernetes import GENERATED, generated_files


def main() -> int:
    GENERATED.mkdir(parents=True, exist_ok=True)
    for name, text in generated_files().items():
        (GENERATED / name).write_text(text)
        print(f"wrote {GENERATED / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
