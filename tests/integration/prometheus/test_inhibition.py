"""The shipped Alertmanager config's inhibitions, against a real Alertmanager 0.25: pairs of alerts
are posted with amtool, and the API says which are silenced and by what."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import yaml

from tests.conftest import REPO, closed_port, free_port, get, wait_for

pytestmark = [pytest.mark.needs("prometheus-alertmanager"), pytest.mark.needs("amtool")]


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory):
    folder = tmp_path_factory.mktemp("alertmanager")
    config = yaml.safe_load((REPO / "prometheus" / "alertmanager.yml").read_text())
    # Its receiver is never reached here: a port that refuses, so nothing waits on a name that resolves nowhere.
    config["receivers"][0]["webhook_configs"][0]["url"] = f"http://127.0.0.1:{closed_port()}/alerts"
    (folder / "alertmanager.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    process = subprocess.Popen(
        ["prometheus-alertmanager", f"--config.file={folder / 'alertmanager.yml'}", f"--storage.path={folder / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(f"{url}/-/ready"), 30, "Alertmanager ready")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def post(url: str, *alerts: dict[str, str]) -> None:
    for labels in alerts:
        subprocess.run(["amtool", "alert", "add", f"--alertmanager.url={url}",
                        *(f"{k}={v}" for k, v in labels.items())], check=True, capture_output=True, timeout=30)


def inhibited(url: str, test: str) -> dict[str, bool]:
    """`alertname target` -> whether it is inhibited, for the alerts of one case (label `test`)."""
    alerts = json.loads(get(f"{url}/api/v2/alerts?filter=test%3D%22{test}%22"))
    return {f"{a['labels']['alertname']} {a['labels'].get('target', '-').removeprefix(f'{test}-')}":
            bool(a["status"]["inhibitedBy"]) for a in alerts}


def case(url: str, test: str, *alerts: dict[str, str], expected: dict[str, bool]) -> None:
    """Each case's targets are its own (`test-a`): the cases share one Alertmanager."""
    post(url, *({**a, "test": test, **({"target": f"{test}-{a['target']}"} if "target" in a else {})}
                for a in alerts))
    # Inhibition is computed as alerts arrive: give it a moment, then it must hold.
    deadline = time.monotonic() + 10
    while (got := inhibited(url, test)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert got == expected, test


def test_a_sidecar_down_silences_no_client_symptom(alertmanager):
    """Finding 5: matched by severity on `target` alone, a critical alert without a target silenced every
    warning without one: LoadwatchSidecarDown (then critical) silenced the TTFT SLO alert (then a warning)."""
    case(alertmanager, "sidecar-then",
         {"alertname": "LoadwatchSidecarDown", "severity": "critical", "job": "loadwatch-engine"},
         {"alertname": "LoadTestTTFTSLOViolated", "severity": "warning", "model": "m", "scenario": "chat"},
         expected={"LoadwatchSidecarDown -": False, "LoadTestTTFTSLOViolated -": False})
    case(alertmanager, "sidecar",
         {"alertname": "LoadwatchSidecarDown", "severity": "warning", "job": "loadwatch-engine"},
         {"alertname": "LoadTestTTFTSLOViolated", "severity": "critical", "model": "m", "scenario": "chat"},
         {"alertname": "LoadTestFailureRateHigh", "severity": "critical", "model": "m", "scenario": "chat"},
         expected={"LoadwatchSidecarDown -": False, "LoadTestTTFTSLOViolated -": False,
                   "LoadTestFailureRateHigh -": False})


def test_an_engine_down_silences_its_own_state_alerts_only(alertmanager):
    case(alertmanager, "down",
         {"alertname": "VLLMEngineDown", "severity": "critical", "target": "a"},
         {"alertname": "VLLMKVCacheSaturated", "severity": "warning", "target": "a"},
         {"alertname": "VLLMSchedulerStuck", "severity": "critical", "target": "a"},
         {"alertname": "VLLMPreemptionsHigh", "severity": "warning", "target": "b"},
         {"alertname": "LoadTestTTFTSLOViolated", "severity": "critical", "model": "m", "scenario": "chat"},
         expected={"VLLMEngineDown a": False, "VLLMKVCacheSaturated a": True, "VLLMSchedulerStuck a": True,
                   "VLLMPreemptionsHigh b": False, "LoadTestTTFTSLOViolated -": False})


def test_a_stuck_or_sleeping_engine_silences_its_growing_queue(alertmanager):
    case(alertmanager, "queue",
         {"alertname": "VLLMSchedulerStuck", "severity": "critical", "target": "a"},
         {"alertname": "VLLMRequestQueueGrowing", "severity": "warning", "target": "a"},
         {"alertname": "VLLMEngineAsleep", "severity": "warning", "target": "b"},
         {"alertname": "VLLMRequestQueueGrowing", "severity": "warning", "target": "b"},
         {"alertname": "VLLMKVCacheSaturated", "severity": "warning", "target": "b"},
         {"alertname": "VLLMRequestQueueGrowing", "severity": "warning", "target": "c"},
         expected={"VLLMSchedulerStuck a": False, "VLLMRequestQueueGrowing a": True, "VLLMEngineAsleep b": False,
                   "VLLMRequestQueueGrowing b": True, "VLLMKVCacheSaturated b": False,
                   "VLLMRequestQueueGrowing c": False})


def test_the_watchdog_neither_silences_nor_is_silenced(alertmanager):
    case(alertmanager, "watchdog",
         {"alertname": "Watchdog", "severity": "none"},
         {"alertname": "VLLMEngineDown", "severity": "critical", "target": "a"},
         {"alertname": "VLLMKVCacheSaturated", "severity": "warning", "target": "c"},
         expected={"Watchdog -": False, "VLLMEngineDown a": False, "VLLMKVCacheSaturated c": False})
