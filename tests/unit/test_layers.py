"""The import graph of src/loadwatch has no upward arrow: a module imports only from its own
package or from a lower layer. A new package must be placed here, which is the point."""

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

LAYERS = [
    # facts declared once, small helpers
    {"catalogue", "defaults", "yamlblock", "assets", "loopback", "atomic", "credentials", "durations",
     "model_options", "interrupts"},
    {"metrics", "processes", "prometheus"},  # pure maths, child processes, the query client
    {"client"},  # the streaming HTTP client
    {"settings", "shared_options"},  # the load generator's options; those several commands share
    {"workloads", "exporter", "engine", "grafana", "rules", "deploy"},
    {"locust_options"},  # the load generator's options in their command-line form, without Locust
    {"fleet"},  # replicas behind a router: the embedded engines and the routers loadwatch knows
    {"loadgen", "stack"},  # Locust integration; the native stack
    {"report"},
    {"loadrun"},  # a Locust run against a stack: what run, capacity and experiment share
    {"run"},  # loadwatch run: stack, Locust, report
    {"capacity"},  # loadwatch capacity: levels of loadwatch-run-like runs
    {"experiment"},  # loadwatch experiment: cells of runs per arm, with verdicts
    {"tune"},  # loadwatch tune: capacity searches and trials, levers adopted one step at a time
    {"cli"},
    {"reference"},  # the docs' reference pages, read from every layer (the CLI's parser among them)
]
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units}
SRC = REPO / "src" / "loadwatch"


def unit_of(module: str) -> str:
    return module.split(".")[1]


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("loadwatch"):
            modules = [f"loadwatch.{a.name}" for a in node.names] if node.module == "loadwatch" else [node.module]
            found.update(modules)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("loadwatch."))
    return found


MODULES = sorted(p for p in SRC.rglob("*.py") if p.parent != SRC or p.name != "__init__.py")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_imports_upwards(path):
    own = ("loadwatch." + ".".join(path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
    assert unit_of(own) in LAYER, f"{unit_of(own)} is in no layer of tests/unit/test_layers.py"
    upward = [m for m in imports(path)
              if unit_of(m) != unit_of(own) and LAYER.get(unit_of(m), 99) >= LAYER[unit_of(own)]]
    assert not upward, f"{own} imports {upward} from its own layer or above"
