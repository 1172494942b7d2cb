"""The limit that binds at the knee, and its evidence, from the client's and the engine's figures
of the levels around it. Pure: figures in, a verdict out."""

from __future__ import annotations

from dataclasses import dataclass

KV_FULL = 0.9  # KV cache usage peak from which the cache is the limit (with requests waiting or preempted)
OUTSIDE_SHARE = 0.5  # client TTFT not spent in the engine, from which the engine is not the limit

LIMITS = {
    "kv_cache": "KV cache: its usage peaks near 100 % with requests waiting or preempted",
    "batch_slots": "batch slots: the running batch holds at its largest while requests wait, KV cache to spare",
    "compute": "compute: latency rises with the load while KV cache and batch slots are free",
    "outside_engine": "outside the engine: most of the client's TTFT is spent before the engine sees the request",
    "load_generator": "the load generator itself: a Locust process could not keep up",
    "slo_only": "SLO only: the target exports no vLLM metrics, so only the client's side is known",
}


@dataclass(frozen=True)
class Diagnosis:
    limit: str  # a key of LIMITS
    evidence: dict

    @property
    def explanation(self) -> str:
        return LIMITS[self.limit]


def diagnose(client: dict, engine: dict, saturated: dict[str, str]) -> Diagnosis:
    """`client`: the results figures of the level that broke (or the last one run); `engine`: its
    engine figures (values None without engine data); `saturated`: its load generator verdicts.
    The engine's own evidence of a full cache or batch comes first: it holds whatever the client
    measured; a late load generator comes next, before what rests on the client's figures."""
    kv, waiting = engine.get("kv_cache_usage_peak"), engine.get("requests_waiting_peak")
    running, preempted = engine.get("requests_running_peak"), engine.get("preemptions")
    no_engine = kv is None and waiting is None and running is None
    queueing = (waiting or 0) >= 1
    if kv is not None and kv >= KV_FULL and (queueing or (preempted or 0) > 0):
        return Diagnosis("kv_cache", {"kv_cache_usage_peak": kv, "requests_waiting_peak": waiting,
                                      "preemptions": preempted})
    if queueing:
        return Diagnosis("batch_slots", {"requests_running_peak": running, "requests_waiting_peak": waiting,
                                         "kv_cache_usage_peak": kv})
    if saturated:
        return Diagnosis("load_generator", {"saturated": saturated})
    if no_engine:
        return Diagnosis("slo_only", {"engine_metrics": "none"})
    client_ttft, engine_ttft = client.get("mean_ttft_ms"), engine.get("engine_mean_ttft_ms")
    if client_ttft and engine_ttft is not None and (client_ttft - engine_ttft) / client_ttft > OUTSIDE_SHARE:
        return Diagnosis("outside_engine", {"client_mean_ttft_ms": client_ttft, "engine_mean_ttft_ms": engine_ttft})
    return Diagnosis("compute", {"kv_cache_usage_peak": kv, "requests_waiting_peak": waiting,
                                 "requests_running_peak": running, "client_p99_tpot_ms": client.get("p99_tpot_ms"),
                                 "client_p99_ttft_ms": client.get("p99_ttft_ms")})
