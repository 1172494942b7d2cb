import json
import threading
import urllib.error
import urllib.request

import pytest

from loadwatch.stack.alert_log import alert_lines, receiver

PAYLOAD = {"status": "firing", "alerts": [
    {"status": "firing", "labels": {"alertname": "VLLMKVCacheSaturated", "severity": "critical", "target": "vllm-0"},
     "annotations": {"summary": "KV cache full", "description": "vllm-0 at 98 %"}},
    {"status": "resolved", "labels": {"alertname": "LoadwatchSidecarDown"}, "annotations": {}},
]}


def test_each_alert_is_one_line_with_status_name_severity_labels_and_text():
    assert alert_lines(PAYLOAD) == [
        "FIRING VLLMKVCacheSaturated [critical] target=vllm-0: KV cache full vllm-0 at 98 %",
        "RESOLVED LoadwatchSidecarDown [none]",
    ]
    with pytest.raises(ValueError, match="no `alerts` list"):
        alert_lines({"status": "firing"})


def test_the_receiver_writes_alerts_and_refuses_what_is_not_a_payload():
    written: list[str] = []
    server = receiver("127.0.0.1", 0, written.append)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/alerts"

    def post(body: bytes) -> int:
        try:
            return urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=5).status
        except urllib.error.HTTPError as exc:
            return exc.code

    try:
        assert post(json.dumps(PAYLOAD).encode()) == 200
        assert post(b"{not json") == 400
    finally:
        server.shutdown()
    assert written[0].startswith("FIRING VLLMKVCacheSaturated") and len(written) == 3
    assert written[2].startswith("refused a POST to /alerts:")
