"""A fleet's part of the run report: each replica's client figures (the requests its answers named)
beside what the replica's engine went through over the run, the spread, and the replicas lost."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from loadwatch.metrics.results import Results, latency_key
from loadwatch.metrics.summary import format_replicas
from loadwatch.prometheus import PrometheusAPI, PrometheusError
from loadwatch.report.engine_at import EngineTimeline


def fleet_figures(results: Results, api: PrometheusAPI | None, start: float, end: float) -> dict | None:
    """None outside a fleet. A replica's engine peaks are None where Prometheus cannot be read."""
    if not results.replicas:
        return None
    rows = []
    for name, r in results.replicas.items():
        try:
            state = EngineTimeline(api, start, end, name).around(start, end) if api is not None else None
        except PrometheusError:
            state = None
        rows.append({"replica": name, "completed": r.completed, "failed": r.failed, "share": r.share,
                     **{key: r.field(key) for key in (latency_key("ttft", "median"), latency_key("ttft", "p99"),
                                                      latency_key("tpot", "median"))},
                     "running_peak": state.running if state else None, "waiting_peak": state.waiting if state else None,
                     "kv_cache_peak": state.kv_cache if state else None})
    # The replicas lost and the faults made (--fault-at), as the summary words them.
    lost = [line for line in format_replicas(results) if line.startswith(("replica ", "fault "))]
    # Round robin splits by count: a slow replica gets its even share and queues it, so the spread of the
    # queues shows an imbalance the shares do not.
    peaks = [r["waiting_peak"] for r in rows if r["waiting_peak"] is not None]
    return {"replicas": rows, "busiest_share_ratio": results.busiest_share_ratio,
            "waiting_spread": max(peaks) - min(peaks) if len(peaks) == len(rows) > 1 else None,
            "unattributed": results.unattributed, "lost": lost}


def prefix_affinity(records: Iterable[dict]) -> dict | None:
    """Where a fleet sent each shared prefix's requests (the records of a prefix-repetition workload,
    each naming its prefix and its replica): the share of a prefix's requests that its most-used
    replica served, over all prefixes (1: each prefix on one replica). None without such records."""
    counts: dict[int, Counter] = defaultdict(Counter)
    for record in records:
        if record.get("prefix") is not None and record.get("replica") and record.get("stage") != "warmup":
            counts[record["prefix"]][record["replica"]] += 1
    total = sum(sum(c.values()) for c in counts.values())
    if not total:
        return None
    return {"prefixes_seen": len(counts), "replicas": len({r for c in counts.values() for r in c}),
            "top_replica_share": sum(max(c.values()) for c in counts.values()) / total}
