"""The router's reason, read end to end: the real vllm-router 0.1.17 with cache_aware in front of two
test replicas that have no /v1/chat/completions/render (as vLLM servers without it), a short run of
shared prefixes, the sidecar's counts of its decisions, and the capacity diagnosis naming
missing_tokens as why prefix-aware routing did not hold (issue 60)."""

from __future__ import annotations

import json

from loadwatch.capacity.diagnose import diagnose
from loadwatch.client.stream import SENT_HEADERS
from loadwatch.metrics.records import read_records
from loadwatch.report.fleet import prefix_affinity
from loadwatch.report.routing import reasons, router_figures
from loadwatch.settings import records_beside
from loadwatch.workloads.datasets import SharedPrefix
from tests.conftest import headless_run, scrape, wait_for
from tests.integration.test_fleet_scale import behind_router
from tests.integration.test_fleet_smg import sidecar


class Scraped:
    """Prometheus's answer to router_figures' queries, from the sidecar's page: a run that began with
    the router increased its counters by their whole value."""

    def __init__(self, url: str) -> None:
        self.samples = scrape(url)

    def query(self, expr: str, at: float) -> list:
        name, labels = next((n, ("outcome",)) if "prefix" in expr else (n, ("policy", "replica"))
                            for n in (expr.split("increase(")[1].split("[")[0],))
        sums: dict[tuple, float] = {}
        for (sample, pairs), value in self.samples.items():
            if sample == name:
                key = tuple(dict(pairs).get(label, "") for label in labels)
                sums[key] = sums.get(key, 0.0) + value
        return [{"metric": dict(zip(labels, key, strict=True)), "value": [at, str(value)]}
                for key, value in sums.items()]


def test_vllm_router_without_the_replicas_render_routes_by_load_and_the_diagnosis_says_missing_tokens(
        fake_server, tmp_path):
    with behind_router(fake_server, "--ttft", "0.05", "--tokens", "5", policy="cache_aware") as fleet, \
            sidecar(fleet) as metrics:
        done = headless_run(fleet.url, tmp_path / "results.json", *fleet.locust_options(), "-u", "4", "-r", "4",
                            "--num-requests", "24", "--dataset", "prefix-repetition", "--num-prefixes", "4",
                            "--prefix-len", "32", "--suffix-len", "8", timeout=50)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        results = json.loads((tmp_path / "results.json").read_text())
        # The sidecar samples the router once a second: its count catches up with the client's.
        def figures() -> dict:
            return router_figures(Scraped(metrics), 0.0, 60.0)

        wait_for(lambda: sum(figures()["outcomes"].values()) >= results["completed"], 10,
                 "the sidecar's count of the router's decisions")
        counted = figures()
    found = reasons(counted, SENT_HEADERS)
    assert found is not None and found["routing_reason"] == "missing_tokens", counted
    assert list(found["prefix_decisions"]) == ["missing_tokens"], "not one prompt's tokens were read"
    engine = {"prefix_caching": 1, "kv_cache_block_size": 16, "prompt_tokens_cached_share": 0.1}
    affinity = prefix_affinity(read_records(records_beside(tmp_path / "results.json")))
    item = next(m for m in diagnose(results, engine, {}, None, SharedPrefix(32, 4), affinity=affinity,
                                    routing=found).missed)
    assert item["item"] == "prefix_aware_routing", affinity
    assert item["evidence"]["routing_reason"] == "missing_tokens"
    assert "/v1/chat/completions/render" in item["explanation"]
