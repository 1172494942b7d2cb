"""The limit that binds at the knee, and its evidence, from the client's and the engine's figures
of the levels around it; and what the run missed that the engine could have done. Pure: figures in,
a verdict out.

Requests that wait for *capacity* (vLLM 0.32's reason) wait for room: in the batch, in the step's
token budget or in the KV cache, and which one binds is read from the engine's state. Requests the
scheduler *deferred* wait for a LoRA adapter's slot where the adapters running fill --max-loras: the
limit `lora_slots`. Otherwise (blocked, waiting on a KV transfer) they are a
stuck scheduler's sign, an alert's business (VLLMSchedulerStuck), not a capacity limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from loadwatch.capacity.room import Batch, room
from loadwatch.metrics.slo import RATIOS, REJECTED_RATIO
from loadwatch.workloads.datasets import SharedPrefix

KV_FULL = 0.9  # KV cache usage peak from which the cache is the limit (with requests waiting or preempted)
OUTSIDE_SHARE = 0.5  # client TTFT not spent in the engine, from which the engine is not the limit
MISSED_HIT_SHARE = 0.5  # a prefix cache that serves under this share of the prompt tokens it could missed them
# A fleet whose router sent under this share of each prefix's requests to the prefix's most-used replica
# spread them: a prefix-aware router sends nearly all of them to one (a replica lost, or one too busy,
# moves some).
AFFINE = 0.8
BY_LOAD = 0.5  # a prefix-aware router that decided over this share of requests by load held no prefix
# A full batch binds only if a bigger one would serve more: from the level below the knee to the knee,
# the running batch grew by GREW times or more, and the output throughput by under FLAT of that growth,
# so the engine's steps only lengthened with more requests in them: its compute binds, not its slots.
GREW = 1.2
# A batch this close to --max-num-seqs is full: the sidecar samples the running count once a second, and
# a full batch of 128 between one request's end and the next one's admission reads 125 (seen at a knee).
FULL_BATCH = 0.95
FLAT = 0.25

# Past the knee, a queue at least this many times the running batch, with no refusal, is one admission
# control would have cut: every request waits behind a batch's worth or more.
QUEUED_PAST = 1.0

LIMITS = {
    "admission": "admission control: the server refuses requests (HTTP 503) once --max-num-queued-reqs requests "
                 "are unfinished or --max-num-queued-tokens prompt tokens wait for prefill",
    "lora_slots": "LoRA adapter slots: the adapters running fill --max-loras, and the scheduler deferred the "
                  "requests of the others until a slot was free",
    "kv_cache": "KV cache: its usage peaks near 100 % with requests waiting or preempted",
    "batch_slots": "batch slots: the running batch is full (--max-num-seqs) while requests wait, KV cache to spare",
    "token_budget": "token budget: requests wait for room with the batch below --max-num-seqs and the KV cache "
                    "free, so the step's token budget (--max-num-batched-tokens) binds",
    "prefill": "compute, in prefill: time to first token rises with the load while nothing waits for room, or "
               "the batch is full but its throughput stopped growing with it",
    "decode": "compute, in decode: time per output token rises with the load while nothing waits for room, or "
              "the batch is full but its throughput stopped growing with it",
    "outside_engine": "outside the engine: most of the client's TTFT is spent before the engine sees the request",
    "imbalance": "the balance: a replica's (or a data-parallel rank's) requests wait for room while another has none "
                 "waiting",
    "replicas": "every replica of the fleet at its own limit: more replicas, or each one tuned",
    "load_generator": "the load generator itself: a Locust process could not keep up",
    "slo_only": "SLO only: the target exports no vLLM metrics, so only the client's side is known",
}
FIRST_TOKEN, PER_TOKEN = {"ttft"}, {"tpot", "itl"}


@dataclass(frozen=True)
class Diagnosis:
    limit: str  # a key of LIMITS
    evidence: dict
    missed: list[dict] = field(default_factory=list)  # [{item, explanation, evidence}]

    @property
    def explanation(self) -> str:
        return LIMITS[self.limit]


def waiting_for_capacity(engine: dict) -> bool:
    """Whether requests waited for room. Before vLLM 0.32 every waiting request did. The reasons come
    from Prometheus's scrapes, the total's peak from the sidecar's 1 s sampling: a wait between two
    scrapes is taken as one for capacity unless the scrapes saw only deferred requests."""
    waiting = engine.get("requests_waiting_peak") or 0
    capacity, deferred = engine.get("requests_waiting_capacity_peak"), engine.get("requests_waiting_deferred_peak")
    if capacity is None:
        return waiting >= 1
    return capacity >= 1 or (waiting >= 1 and not deferred)


def lora_slots(results: dict, engine: dict) -> dict | None:
    """The evidence that requests waited for a LoRA adapter's slot, or None: the scheduler deferred
    requests while the adapters running filled --max-loras. vLLM 0.32 never shows the adapters that
    wait (a request's QUEUED event reaches its front end only with its SCHEDULED one, so
    vllm:lora_requests_info lists the running adapters under both labels): the adapters the workload
    asked for are the client's, the models of its traffic split."""
    limit, deferred = engine.get("lora_max_adapters"), engine.get("requests_waiting_deferred_peak")
    running, waiting = engine.get("lora_adapters_running_peak"), engine.get("lora_adapters_waiting_peak")
    busiest = max((v for v in (running, waiting) if v is not None), default=None)
    if not limit or not deferred or busiest is None or busiest < limit:
        return None
    return {"lora_adapters_running_peak": running, "lora_adapters_waiting_peak": waiting, "lora_max_adapters": limit,
            "lora_adapters_requested": len(results.get("models") or {}) or None}


def diagnose(results: dict, engine: dict, saturated: dict[str, str], batch: Batch | None = None,
             prefix: SharedPrefix | None = None, below: tuple[dict, dict] | None = None,
             replicas: dict[str, ReplicaState] | None = None, affinity: dict | None = None,
             full_served: float | None = None, routing: dict | None = None,
             ranks: dict[str, dict[str, ReplicaState]] | None = None) -> Diagnosis:
    """`results`: the results of the level that broke (or the last one run); `engine`: its engine
    figures (values None without engine data); `saturated`: its load generator verdicts; `batch`:
    --max-num-seqs where known; `prefix`: what its prompts share; `below`: the results and engine
    figures of the level run just below it, if any; `replicas`: a fleet's replicas' own state, by
    name; `affinity`: where it sent each shared prefix's requests; `full_served`: the most output
    throughput a level at or below it served with as big a batch; `routing`: why its router kept no
    prefix on one replica (report.routing.reasons), if it says; `ranks`: the data-parallel ranks' own
    state of each server that runs more than one, by server and rank. The engine's own evidence of a full cache, batch
    or budget comes first: it holds whatever the client measured; a late load generator comes next,
    before what rests on the client's figures."""
    if refused(results):
        return Diagnosis("admission", admission(results, engine), missed(results, engine, prefix, affinity, routing))
    limit, evidence = _limit(results, engine, saturated, batch, below, full_served)
    if limit not in ("slo_only", "load_generator"):
        evidence.update(room(results, engine, batch, prefix))
    if replicas and len(replicas) > 1 and limit not in ("slo_only", "load_generator"):
        limit, evidence = _fleet(results, engine, limit, evidence, replicas)
    if ranks and limit not in ("slo_only", "load_generator", "imbalance"):
        limit, evidence = _ranks(results, engine, limit, evidence, ranks)
    if limit == "imbalance" and routing and routing["routing_reason"] == "no_hash_key":
        evidence.update(routing)  # one replica took every request: the hash's doing, not the load's
    return Diagnosis(limit, evidence, missed(results, engine, prefix, affinity, routing))


def refused(results: dict) -> bool:
    """Whether the level's server refused more requests than its SLOs allow: any refusal, unless a
    rejected_ratio SLO bounds them (and held). A server that sheds load has reached what it admits,
    whatever the admitted requests' latency says."""
    if not results.get("rejected"):
        return False
    bound = next((s for s in results.get("slo") or [] if s["name"] == REJECTED_RATIO), None)
    return bound is None or not bound["passed"]


def admission(results: dict, engine: dict) -> dict:
    """The evidence of admission control: its refusals by reason, the server's own count beside the
    client's, and whether the admitted requests kept their latency SLOs (a cap that refuses enough
    keeps them; one that refuses too little lets the queue grow behind it)."""
    latency = [s for s in results.get("slo") or [] if s["name"] not in RATIOS]
    return {"rejected": results.get("rejected"), "rejected_ratio": results.get("rejected_ratio"),
            "rejections": results.get("rejections") or {},
            "server_admission_rejections": engine.get("admission_rejections"),
            "admitted_within_slo": all(s["passed"] for s in latency) if latency else None,
            "admitted_slo": {s["name"]: s["measured"] for s in latency},
            "client_p99_ttft_ms": results.get("p99_ttft_ms"), "requests_waiting_peak":
            engine.get("requests_waiting_peak"), "requests_running_peak": engine.get("requests_running_peak")}


@dataclass(frozen=True)
class ReplicaState:
    """A fleet's replica at the level that broke: its own peaks (report.engine.server_peaks), and its
    --max-num-seqs where known (its flags, or inferred from its own levels)."""

    peaks: dict
    batch: Batch | None = None


def _fleet(results: dict, engine: dict, limit: str, evidence: dict,
           replicas: dict[str, ReplicaState]) -> tuple[str, dict]:
    """A fleet's limit. Its busiest replica's own limit comes from its own peaks: one replica out of
    room while another has some is the routing's doing (imbalance); all of them out of room is the
    replicas' own limit, evenly. Time lost outside the engines stays `outside_engine`: vllm-router
    0.1.17 exports no latency of its own, so the router cannot be told from the replicas' API servers,
    the network or the client."""
    each = _each(replicas)
    queueing = sorted(name for name, state in replicas.items() if waiting_for_capacity(state.peaks))
    if not queueing:
        return limit, {**evidence, "replicas": each}  # compute, each replica's: nothing waits for room
    busiest = max(queueing, key=lambda name: replicas[name].peaks.get("requests_waiting_peak") or 0)
    own, own_evidence = _limit(results, {**engine, **replicas[busiest].peaks}, {}, replicas[busiest].batch, None,
                               None)
    with_room = sorted(name for name, state in replicas.items() if not (state.peaks.get("requests_waiting_peak") or 0))
    fleet = {"busiest_replica": busiest, "replica_limit": own, "replicas_queueing": queueing, "replicas": each,
             **{f"busiest_{key}": value for key, value in own_evidence.items()}}
    if with_room:
        return "imbalance", {**fleet, "replicas_with_room": with_room}
    return "replicas", fleet


def _each(states: dict[str, ReplicaState]) -> dict[str, dict]:
    """Each replica's (or rank's) peaks that say which one ran out of room, by name."""
    return {name: {key: state.peaks.get(key) for key in ("requests_waiting_peak", "requests_running_peak",
                                                         "kv_cache_usage_peak")}
            for name, state in sorted(states.items())}


def _ranks(results: dict, engine: dict, limit: str, evidence: dict,
           ranks: dict[str, dict[str, ReplicaState]]) -> tuple[str, dict]:
    """The data-parallel ranks of a server, as a fleet's replicas: one rank out of room while another
    of the same server has some is `imbalance` (vLLM's own balancer sends each request to the rank with
    the fewest waiting plus running requests, so a rank pinned by a router's X-data-parallel-rank header,
    or held by long requests the count does not weigh, queues alone). Otherwise the limit stands, with
    each rank's peaks beside it: a hot rank is never lost in its server's total."""
    each = {server: _each(states) for server, states in sorted(ranks.items())}
    for server, states in sorted(ranks.items()):
        queueing = sorted(rank for rank, state in states.items() if waiting_for_capacity(state.peaks))
        with_room = sorted(rank for rank, state in states.items()
                           if not (state.peaks.get("requests_waiting_peak") or 0))
        if queueing and with_room:
            busiest = max(queueing, key=lambda rank: states[rank].peaks.get("requests_waiting_peak") or 0)
            own, own_evidence = _limit(results, {**engine, **states[busiest].peaks}, {}, states[busiest].batch,
                                       None, None)
            return "imbalance", {**evidence, "server": server, "busiest_rank": busiest, "rank_limit": own,
                                 "ranks_queueing": queueing, "ranks_with_room": with_room, "ranks": each,
                                 **{f"busiest_rank_{key}": value for key, value in own_evidence.items()}}
    return limit, {**evidence, "ranks": each}


def _limit(results: dict, engine: dict, saturated: dict[str, str], batch: Batch | None,
           below: tuple[dict, dict] | None, full_served: float | None) -> tuple[str, dict]:
    kv, waiting = engine.get("kv_cache_usage_peak"), engine.get("requests_waiting_peak")
    running, preempted = engine.get("requests_running_peak"), engine.get("preemptions")
    queue = {"requests_waiting_peak": waiting, "requests_waiting_capacity_peak":
             engine.get("requests_waiting_capacity_peak"), "requests_waiting_deferred_peak":
             engine.get("requests_waiting_deferred_peak")}
    slots = lora_slots(results, engine)
    if slots is not None:
        return "lora_slots", {**slots, **queue, "requests_running_peak": running}
    for_room = waiting_for_capacity(engine)
    if kv is not None and kv >= KV_FULL and (for_room or (preempted or 0) > 0):
        return "kv_cache", {"kv_cache_usage_peak": kv, **queue, "preemptions": preempted}
    if for_room:
        full = batch is not None and running is not None and running >= FULL_BATCH * batch.max_num_seqs
        flat = _throughput_flat(below, results, engine, full_served) if full else None
        if flat is not None:
            return _compute(results, engine, {"batch_full": True, **flat, **queue})
        return ("batch_slots" if full else "token_budget"), {"requests_running_peak": running, **queue,
                                                             "kv_cache_usage_peak": kv}
    if saturated:
        return "load_generator", {"saturated": saturated}
    if kv is None and waiting is None and running is None:
        return "slo_only", {"engine_metrics": "none"}
    client_ttft, engine_ttft = results.get("mean_ttft_ms"), engine.get("engine_mean_ttft_ms")
    if client_ttft and engine_ttft is not None and (client_ttft - engine_ttft) / client_ttft > OUTSIDE_SHARE:
        return "outside_engine", {"client_mean_ttft_ms": client_ttft, "engine_mean_ttft_ms": engine_ttft}
    return _compute(results, engine, {})


def _throughput_flat(below: tuple[dict, dict] | None, results: dict, engine: dict,
                     full_served: float | None) -> dict | None:
    """The evidence that the output throughput stopped growing with the running batch from the level
    below to this one, or None (it grew with it, or a figure is missing). The full batch is credited
    with the most any level served with it: a level cut short once clearly lost measured its
    throughput while its queue filled, below what the same batch served at a level that held."""
    if below is None:
        return None
    before, after = below[1].get("requests_running_peak"), engine.get("requests_running_peak")
    served_before = below[0].get("output_throughput")
    served = max((v for v in (results.get("output_throughput"), full_served) if v), default=None)
    if not (before and after and served_before and served) or after < GREW * before:
        return None
    if served / served_before - 1 >= FLAT * (after / before - 1):
        return None
    return {"requests_running_peak_below": before, "requests_running_peak": after,
            "output_throughput_below": served_before, "output_throughput": served}


def _compute(results: dict, engine: dict, evidence: dict) -> tuple[str, dict]:
    """Compute binds: in prefill or in decode, by the SLO that broke, else by where the engine spent
    the requests' time."""
    broken = {s["name"].split("_")[0] for s in results.get("slo") or [] if not s.get("passed", True)}
    prefill, decode = engine.get("prefill_time_share"), engine.get("decode_time_share")
    if broken and broken <= FIRST_TOKEN:
        phase = "prefill"
    elif broken and broken <= PER_TOKEN:
        phase = "decode"
    else:  # E2E, several, or none broken: the phase the engine spent more of the requests' time in
        phase = "prefill" if (prefill or 0) > (decode or 0) else "decode"
    return phase, {"slo_broken": sorted(broken), "prefill_time_share": prefill, "decode_time_share": decode,
                   "iteration_tokens_mean": engine.get("iteration_tokens_mean"),
                   "requests_running_peak": engine.get("requests_running_peak"),
                   "kv_cache_usage_peak": engine.get("kv_cache_usage_peak"),
                   "client_p99_ttft_ms": results.get("p99_ttft_ms"), "client_p99_tpot_ms": results.get("p99_tpot_ms"),
                   **evidence}


def missed(results: dict, engine: dict, prefix: SharedPrefix | None, affinity: dict | None = None,
           routing: dict | None = None) -> list[dict]:
    """What the engine could have done for this workload and did not, each with its evidence.
    `affinity`: where a fleet sent each shared prefix's requests (report.fleet.prefix_affinity);
    `routing`: why the router did not keep them together, where its counters say."""
    return _prefix_missed(results, engine, prefix, affinity, routing)


def overload(results: dict, engine: dict) -> dict | None:
    """Past the knee, a queue that grew past the running batch while the server refused nothing: every
    request waited behind it, and each one's TTFT grew. Admission control would refuse the excess with
    a 503 that a router or client retries elsewhere, so that the admitted keep their TTFT; vLLM has
    two caps, and each acts on its own queue:
    - --max-num-queued-tokens, on the prompt tokens waiting for prefill, sized as its docstring says:
      the target TTFT times the rate the engine took prompt tokens in here. Where requests wait for a
      batch slot rather than for prefill, this backlog stays small and the cap may never bind;
    - --max-num-queued-reqs, on the unfinished requests: the running batch plus the requests that
      drain within the target TTFT at the rate requests completed here.
    Not a missed capacity: a refusal counts against the load sustained, so a cap protects the SLO past
    the knee and moves no knee. None where the queue stayed short, or the server already refused."""
    waiting, running = engine.get("requests_waiting_peak"), engine.get("requests_running_peak")
    if results.get("rejected") or not waiting or not running or waiting < QUEUED_PAST * running:
        return None
    ttft = next((s for s in results.get("slo") or [] if s["name"].startswith("ttft_")), None)
    rate, served = engine.get("prompt_tokens_per_second"), results.get("request_throughput")
    target = ttft["limit"] / 1000 if ttft else None
    tokens = round(target * rate) if target and rate else None
    requests = round(running + math.floor(target * served)) if target and served else None
    sized = ("--max-num-queued-tokens (a target TTFT times the prompt tokens a second the engine takes in) or "
             "--max-num-queued-reqs (the batch plus the requests that complete within that TTFT)")
    if ttft and tokens and requests:
        sized = (f"--max-num-queued-tokens {tokens} ({ttft['name']} {ttft['limit']:g} ms times the {rate:.0f} "
                 f"prompt tokens a second the engine took in here) or --max-num-queued-reqs {requests} (the batch of "
                 f"{running:.0f} plus the requests that complete in that time at {served:.2f} a second)")
    why = (f"{waiting:.0f} requests waited behind a batch of {running:.0f} and the server refused none: each one's "
           f"TTFT grew with the queue; admission control, {sized}, would refuse the excess (HTTP 503, which a "
           "router or client retries elsewhere) so that the requests it admits keep their TTFT")
    return {"explanation": why, "requests_waiting_peak": waiting, "requests_running_peak": running,
            "client_p99_ttft_ms": results.get("p99_ttft_ms"), "prompt_tokens_per_second": rate,
            "request_throughput": served, "ttft_slo": ttft["name"] if ttft else None,
            "max_num_queued_tokens": tokens, "max_num_queued_reqs": requests}


def _prefix_missed(results: dict, engine: dict, prefix: SharedPrefix | None, affinity: dict | None,
                   routing: dict | None) -> list[dict]:
    block_size = engine.get("kv_cache_block_size")
    if prefix is None or (block_size and prefix.tokens < block_size):
        return []  # nothing shared, or less than one block: nothing a prefix cache could keep
    prompt = (results.get("total_input_tokens") or 0) / max(1, results.get("completed") or 0)
    cacheable = (prefix.tokens // int(block_size) * block_size if block_size else prefix.tokens) / prompt \
        if prompt else None
    hit = engine.get("prompt_tokens_cached_share")
    if hit is None:
        hit = engine.get("prefix_cache_hit_ratio")
    evidence = {"shared_prefix_tokens": prefix.tokens, "distinct_prefixes": prefix.distinct,
                "mean_prompt_tokens": round(prompt) if prompt else None, "cacheable_share": cacheable,
                "prefix_caching": engine.get("prefix_caching"), "prompt_tokens_cached_share": hit}
    if engine.get("prefix_caching") == 0:
        why = (f"the prompts share a {prefix.tokens}-token prefix ({prefix.distinct} distinct), but prefix caching "
               "is off: every request prefills it again (vLLM's --enable-prefix-caching)")
        return [{"item": "prefix_cache", "explanation": why, "evidence": evidence}]
    # A router that decided most requests by load held no prefix, whatever share its load routing
    # happened to leave on one replica (by load, idle replicas tie and the first one wins).
    by_load = (routing or {}).get("by_load_share") or 0.0
    if affinity and affinity["replicas"] > 1 and prefix.distinct >= affinity["replicas"] \
            and (affinity["top_replica_share"] < AFFINE or by_load > BY_LOAD):
        where = (f"routed {by_load:.0%} of its prefix-aware decisions by load" if by_load > BY_LOAD else
                 f"spread each prefix's requests over the {affinity['replicas']} replicas")
        why = (f"the prompts share {prefix.distinct} prefixes of {prefix.tokens} tokens, but the router {where} "
               f"({affinity['top_replica_share']:.0%} of a prefix's requests on its most-used replica): the replicas "
               "prefilled and cached the same prefixes; a prefix-aware policy sends a prefix's requests to one "
               "replica (smg's cache_aware or prefix_hash, on the prompt's text; vllm-router's cache_aware where "
               "the replicas render the prompt's tokens; a hash policy only with a key header a prefix's requests "
               "share)")
        if routing:
            why = f"{why}; it did not because {routing['why']}"
        return [{"item": "prefix_aware_routing", "explanation": why,
                 "evidence": {**evidence, **affinity, **{k: v for k, v in (routing or {}).items() if k != "why"}}}]
    if cacheable and hit is not None and hit < MISSED_HIT_SHARE * cacheable:
        why = (f"the prompts share a {prefix.tokens}-token prefix, {cacheable:.0%} of a prompt that a cache could "
               f"serve, but only {hit:.0%} of prompt tokens came from the cache")
        return [{"item": "prefix_cache", "explanation": why, "evidence": evidence}]
    return []
