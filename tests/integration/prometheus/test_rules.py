"""promtool and amtool over prometheus/: configs valid, every rule unit-tested, every alert named."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from tests.conftest import REPO

PROM = REPO / "prometheus"
ALERTS = {"VLLMEngineDown", "VLLMKVCacheSaturated", "VLLMRequestQueueGrowing", "VLLMPreemptionsHigh",
          "VLLMSpecDecodeAcceptanceLow", "LoadTestTTFTSLOViolated", "LoadTestFailureRateHigh", "LoadwatchSidecarDown",
          "VLLMSchedulerStuck", "VLLMEngineAsleep", "Watchdog", "VLLMFleetImbalanced", "VLLMRouterDown",
          "VLLMSheddingLoad", "VLLMRanksImbalanced"}
pytestmark = pytest.mark.needs("promtool")


def run(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, cwd=PROM, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_prometheus_config_and_rules_are_valid():
    out = run("promtool", "check", "config", "prometheus.yml")
    assert f"SUCCESS: {len(ALERTS)} rules found" in out  # alerts.yml: every alert, and nothing else


def test_promtool_unit_tests_pass():
    out = run("promtool", "test", "rules", *sorted(f"tests/{p.name}" for p in (PROM / "tests").glob("*.yml")))
    assert "FAILED" not in out


def test_alertmanager_config_is_valid():
    run("amtool", "check-config", "alertmanager.yml")


def test_alerts_are_exactly_the_designed_ones_with_severity_summary_and_description():
    rules = yaml.safe_load((PROM / "rules" / "alerts.yml").read_text())
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    assert set(alerts) == ALERTS
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in ("warning", "critical", "none"), name
        assert rule["annotations"]["runbook_url"].endswith(f"#{name.lower()}"), name
        assert rule["annotations"]["summary"], name
        assert "{{" in rule["annotations"]["description"], name


def test_every_alert_is_tested_firing():
    tests = yaml.safe_load((PROM / "tests" / "alerts_test.yml").read_text())["tests"]
    fired = {case["alertname"] for t in tests for case in t.get("alert_rule_test", []) if case["exp_alerts"]}
    assert fired == ALERTS


def test_recording_rule_names_are_level_metric_operations():
    rules = yaml.safe_load((PROM / "rules" / "recording.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            level, metric, operations = rule["record"].split(":")
            assert level and metric.startswith("loadwatch_") and operations, rule["record"]
            assert " by (" not in rule["expr"], "aggregate with without(), so engines and workers add up"


def test_recording_rules_are_what_the_generator_writes():
    from loadwatch.rules.recording import render

    assert (PROM / "rules" / "recording.yml").read_text() == render(), "drifted: run `python -m loadwatch.rules`"
