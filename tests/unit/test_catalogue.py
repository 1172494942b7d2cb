"""Every loadwatch series that a dashboard, rule, rule test, manifest or module names is in the catalogue."""

import re

import pytest

from loadwatch.catalogue import names
from tests.conftest import REPO

# Series names, not the `level:name:operations` of a recording rule, whose middle part need not be a family.
SERIES = re.compile(r"(?<![:\w])(loadwatch_(?:client|engine|router)_[a-z0-9_]+|loadwatch_run_info|"
                    r"loadwatch_slo_objective)")
SUFFIXES = ("_total", "_bucket", "_sum", "_count")
SOURCES = [*(REPO / "grafana" / "dashboards").glob("*.json"), *(REPO / "prometheus").glob("*/*.yml"),
           *(REPO / "deploy" / "kubernetes" / "components" / "prometheus-operator" / "generated").glob("*.yaml"),
           *[p for p in (REPO / "src" / "loadwatch").rglob("*.py") if p.name != "catalogue.py"]]


def family(sample: str) -> str:
    for suffix in SUFFIXES:
        if sample.endswith(suffix) and sample.removesuffix(suffix) in names():
            return sample.removesuffix(suffix)
    return sample


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_series_named_is_in_the_catalogue(path):
    unknown = {s for s in SERIES.findall(path.read_text()) if family(s) not in names()}
    assert not unknown, f"{path.relative_to(REPO)} names series the catalogue lacks: {sorted(unknown)}"


def test_the_sources_are_read():
    found = {family(s) for path in SOURCES for s in SERIES.findall(path.read_text())}
    assert {"loadwatch_client_time_to_first_token_seconds", "loadwatch_engine_kv_cache_usage_ratio_max",
            "loadwatch_run_info"} <= found


def test_the_modules_read_names_from_the_catalogue_not_retype_them():
    retyped = [p.relative_to(REPO) for p in SOURCES if p.suffix == ".py" and SERIES.search(p.read_text())]
    assert not retyped, f"modules that spell out a series name: {retyped}"
