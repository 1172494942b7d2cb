"""The promtool tests hold under Prometheus 2 and 3 alike, and the alerts are generated as designed.

Prometheus 3 (what kube-prometheus-stack ships) reads a range `[w]` as left-open: samples 1m apart
leave one in a `[1m]` window, and `rate()` of one sample is empty. A test that samples so sparsely
passes on promtool 2.42 (the one here) and fails on 3. Every test here samples at least twice in the
smallest window its rules read; only promtool 2.42 runs on these machines, so this is the proof.
"""

from __future__ import annotations

import re

import yaml

from loadwatch.rules import alerts
from tests.conftest import REPO

PROM = REPO / "prometheus"
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
RANGE = re.compile(r"\[(\w+?)(?::\w*)?\]")


def seconds(text: str) -> float:
    """A Prometheus duration (`15s`, `1h25m`) in seconds."""
    parts = re.findall(r"(\d+)(ms|[smhdwy])", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a duration: {text}"
    return sum(int(n) * UNITS[u] for n, u in parts)


def windows(exprs: list[str]) -> list[float]:
    return [seconds(w) for expr in exprs for w in RANGE.findall(expr)]


def rule_exprs(test_file) -> list[str]:
    doc = yaml.safe_load(test_file.read_text())
    exprs = []
    for name in doc["rule_files"]:
        rules = yaml.safe_load((test_file.parent / name).read_text())
        exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    return exprs


def sparse_tests(test_file) -> list[str]:
    """The tests of a file that could hold one sample in some window: what fails under Prometheus 3."""
    doc = yaml.safe_load(test_file.read_text())
    smallest_rule_window = min(windows(rule_exprs(test_file)))
    out = []
    if seconds(doc.get("evaluation_interval", "1m")) * 2 > smallest_rule_window:
        out.append(f"evaluation_interval {doc.get('evaluation_interval', '1m (default)')}")
    for test in doc["tests"]:
        exprs = [case["expr"] for case in test.get("promql_expr_test", [])]
        smallest = min([smallest_rule_window, *windows(exprs)])
        if seconds(test.get("interval", doc.get("evaluation_interval", "1m"))) * 2 > smallest:
            out.append(test["name"])
    return out


def test_every_promtool_test_samples_at_least_twice_in_each_window():
    files = sorted((PROM / "tests").glob("*.yml"))
    assert len(files) == 2
    for path in files:
        assert sparse_tests(path) == [], f"{path.name}: sample every 15s (Prometheus 3's ranges are left-open)"


def test_the_check_catches_a_test_sampled_once_a_minute(tmp_path):
    (tmp_path / "rules.yml").write_text("groups: [{name: g, rules: [{record: r, expr: 'rate(x_total[1m])'}]}]\n")
    test = tmp_path / "t.yml"
    test.write_text("rule_files: [rules.yml]\nevaluation_interval: 15s\n"
                    "tests: [{name: sparse, interval: 1m, input_series: []}, {name: dense, interval: 15s}]\n")
    assert sparse_tests(test) == ["sparse"]
    assert seconds("1h25m") == 5100 and windows(["rate(a[5m]) + max_over_time(b[1h:1m])"]) == [300, 3600]


def test_the_alert_file_is_what_the_generator_writes():
    assert (PROM / "rules" / "alerts.yml").read_text() == alerts.render(alerts.DEFAULT_RUNBOOK_BASE), \
        "drifted: run `python -m loadwatch.rules`"


SYMPTOMS = {"VLLMEngineDown", "LoadTestTTFTSLOViolated", "LoadTestFailureRateHigh", "VLLMSchedulerStuck",
            "VLLMRouterDown"}
CAUSES = {"VLLMKVCacheSaturated", "VLLMRequestQueueGrowing", "VLLMPreemptionsHigh", "VLLMSheddingLoad",
          "VLLMSpecDecodeAcceptanceLow",
          "LoadwatchSidecarDown", "VLLMEngineAsleep", "VLLMFleetImbalanced",
          "VLLMRanksImbalanced"}


def test_symptoms_page_causes_warn_and_the_watchdog_is_none():
    severity = {a.name: a.severity for a in alerts.ALERTS}
    assert {n for n, s in severity.items() if s == "critical"} == SYMPTOMS
    assert {n for n, s in severity.items() if s == "warning"} == CAUSES
    assert {n for n, s in severity.items() if s == "none"} == {"Watchdog"}


def test_every_alert_links_its_own_section_of_the_runbooks():
    page = (REPO / "docs" / "runbooks.md").read_text()
    headings = {line[3:].strip() for line in page.splitlines() if line.startswith("## ")}
    rules = yaml.safe_load(alerts.render("https://wiki.example/runbooks/"))["groups"][0]["rules"]
    assert {r["alert"] for r in rules} <= headings, "a section of docs/runbooks.md per alert"
    for r in rules:
        assert r["annotations"]["runbook_url"] == f"https://wiki.example/runbooks#{r['alert'].lower()}"


def test_the_slo_alerts_follow_the_runs_objectives():
    by_name = {a.name: a for a in alerts.ALERTS}
    ttft = by_name["LoadTestTTFTSLOViolated"].expr
    for stat in alerts.TTFT_MEASURES:
        assert f'loadwatch_slo_objective{{slo="ttft_{stat}_ms"}}' in ttft
    assert 'unless on () loadwatch_slo_objective{slo=~"ttft_.*"}' in ttft  # the default only without one
    assert 'loadwatch_slo_objective{slo="failure_ratio"}' in by_name["LoadTestFailureRateHigh"].expr
