"""The name a replica answers with, asked of it directly: the `system_fingerprint` of a one-token
completion sent to its own address, read from the usage chunk as the load generator reads it.

A fleet whose replicas the router lists by address (Kubernetes pods, scaled in and out) and whose
requests are named by a pattern of fingerprints (`--replica 'vllm-*'`) names each listed replica by
what it answers, so that a request's record, the sidecar's target and the router's view all call a
pod by one name (DESIGN.md: `replica` = `target`), and a pod keeps its name when others come and go.
"""

from __future__ import annotations

import json
import urllib.request

from loadwatch import loopback
from loadwatch.client.failures import RequestFailed
from loadwatch.client.sse import DONE, SSEDecoder
from loadwatch.credentials import read_secret
from loadwatch.fleet.routers import RouterError


def answered_name(url: str, timeout: float = 30.0) -> str:
    """`url`'s fingerprint, from its first model; RouterError saying why where it gives none."""
    base = url.rstrip("/")
    key = read_secret("OPENAI_API_KEY")
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    try:
        with loopback.urlopen(urllib.request.Request(base + "/v1/models", headers=headers), timeout) as answer:
            model = json.loads(answer.read())["data"][0]["id"]
        body = json.dumps({"model": model, "prompt": "Hi", "max_tokens": 1, "stream": True,
                           "stream_options": {"include_usage": True}}).encode()
        asked = urllib.request.Request(base + "/v1/completions", data=body, headers=headers, method="POST")
        with loopback.urlopen(asked, timeout) as answer:
            decoder = SSEDecoder()
            events = decoder.feed(answer.read()) + decoder.close()
        said = [json.loads(event).get("system_fingerprint") for event in events if event != DONE]
        fingerprint = next((name for name in reversed(said) if name), None)
    except (OSError, ValueError, KeyError, IndexError, TypeError, RequestFailed) as exc:
        raise RouterError(f"the replica at {url} did not answer a one-token completion ({exc}), so its name "
                          "is not known") from None
    if not isinstance(fingerprint, str) or not fingerprint:
        raise RouterError(f"the replica at {url} answers with no system_fingerprint: start each replica with "
                          "--fingerprint-mode custom --fingerprint-value NAME (docs/guides/fleet.md)")
    return fingerprint
