"""YAML dumped as people write it: multi-line strings (dashboards, PromQL) as literal blocks,
readable in review and in diffs."""

from __future__ import annotations

import yaml


class BlockDumper(yaml.SafeDumper):
    pass


BlockDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None),
)


def dump(document: object, width: int = 120) -> str:
    return yaml.dump(document, Dumper=BlockDumper, sort_keys=False, width=width)
