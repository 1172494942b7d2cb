"""The levers tune pulls, in one catalogue: for each, the limit it relieves, when it applies (read
from the capacity search's evidence), the flag and the step it takes, and why, in a line a user
reads. The docs' table (docs/guides/tune.md) is this list.

A lever proposes a Change or None: None where its condition does not hold, or where the step would
change nothing (the flag is already there). Limits no engine flag relieves end the loop with a
sentence saying what would help instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from loadwatch.engine.flags import CPU_DEFAULT_MAX_NUM_SEQS
from loadwatch.fleet.options import FleetOptions
from loadwatch.tune.config import Change, Config

BATCH_STEP = 4  # --max-num-seqs grows at most this many times a step, and never past what the KV cache holds
TOKEN_BUDGET_DEFAULT = 2048  # vLLM's --max-num-batched-tokens for its API server on the CPU (and smaller GPUs)
MEMORY_CEILING = 0.95  # --gpu-memory-utilization is raised by 0.05 a step, to this at most
NGRAM = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}'


@dataclass
class Situation:
    """What a lever reads: the capacity search's conclusion and the configuration it ran."""

    evidence: dict
    missed: list[str]  # items of capacity.json's `missed`
    config: Config
    embedded: bool  # the embedded engine (the CPU), not a --target
    kv_cache_gib: int = 1  # the embedded engine's VLLM_CPU_KVCACHE_SPACE when the configuration sets none
    fleet: FleetOptions | None = None  # an embedded fleet's options: its router policy and replicas are levers
    # Why the router did not do a missed item (capacity's evidence `routing_reason`), by item.
    reasons: dict[str, str] = field(default_factory=dict)

    def router_policy(self) -> str | None:
        """The embedded fleet's router policy in this configuration; None outside an embedded fleet."""
        if self.fleet is None or not self.fleet.embedded:
            return None
        given = self.config.value("--router-policy") or self.fleet.router_policy
        return given or self.fleet.program.default_policy


@dataclass(frozen=True)
class Lever:
    relieves: str  # a limit of capacity/diagnose.LIMITS, or `missed:<item>`
    flag: str
    when: str  # the condition, in words
    reason: str
    propose: Callable[[Situation], Change | None] = field(repr=False)


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text is not None else None
    except ValueError:
        return None


def _max_num_seqs(s: Situation) -> Change | None:
    current = _int(s.config.value("--max-num-seqs")) or s.evidence.get("max_num_seqs") or CPU_DEFAULT_MAX_NUM_SEQS
    holds = s.evidence.get("kv_cache_holds_requests")
    target = BATCH_STEP * current if holds is None else min(holds, BATCH_STEP * current)
    return Change("--max-num-seqs", s.config.value("--max-num-seqs"), str(target)) if target > current else None


def _token_budget(s: Situation) -> Change | None:
    before = s.config.value("--max-num-batched-tokens")
    return Change("--max-num-batched-tokens", before, str(2 * (_int(before) or TOKEN_BUDGET_DEFAULT)))


def _blocks(s: Situation) -> Change | None:
    before = _int(s.config.value("--num-gpu-blocks-override"))
    return None if before is None else Change("--num-gpu-blocks-override", str(before), str(2 * before))


def _cpu_kv_space(s: Situation) -> Change | None:
    if not s.embedded or s.config.value("--num-gpu-blocks-override") is not None:
        return None  # a pinned block count overrides the space (vLLM's platforms/cpu.py)
    before = s.config.value("VLLM_CPU_KVCACHE_SPACE")
    return Change("VLLM_CPU_KVCACHE_SPACE", before, str(2 * (_int(before) or s.kv_cache_gib)))


def _gpu_memory(s: Situation) -> Change | None:
    if s.embedded:
        return None
    before = s.config.value("--gpu-memory-utilization")
    after = round(min(MEMORY_CEILING, float(before or 0.9) + 0.05), 2)
    return Change("--gpu-memory-utilization", before, f"{after:g}") if after > float(before or 0.9) else None


def _kv_dtype(s: Situation) -> Change | None:
    before = s.config.value("--kv-cache-dtype")
    return Change("--kv-cache-dtype", before, "fp8") if before in (None, "auto") else None


def _max_model_len(s: Situation) -> Change | None:
    """No longer than the workload needs: twice its mean context, in whole blocks of 16."""
    before = _int(s.config.value("--max-model-len"))
    context = s.evidence.get("mean_context_tokens")
    if before is None or not context:
        return None
    after = 16 * math.ceil(2 * context / 16)
    return Change("--max-model-len", str(before), str(after)) if after < before else None


def _speculate(s: Situation) -> Change | None:
    return None if s.config.value("--speculative-config") else Change("--speculative-config", None, NGRAM)


def _prefix_caching(s: Situation) -> Change | None:
    return Change("--enable-prefix-caching", s.config.value("--enable-prefix-caching"), "true") \
        if "prefix_cache" in s.missed else None


def _admission_cap(flag: str) -> Callable[[Situation], Change | None]:
    """Twice the admission cap that refused (the reason vLLM counted the refusals under names the
    flag), where the configuration sets it: the server then admits a longer queue, and the search
    after says whether the admitted requests kept their SLO with it."""
    reason = flag.removeprefix("--").replace("-", "_")

    def propose(s: Situation) -> Change | None:
        before = _int(s.config.value(flag))
        if before is None or not (s.evidence.get("rejections") or {}).get(reason):
            return None
        return Change(flag, str(before), str(max(1, 2 * before)))
    return propose


def _max_loras(s: Situation) -> Change | None:
    """A slot for every adapter the workload asked for at once, so that none waits for another's turn
    (twice the slots where the workload's adapters are unknown); no further than a --max-cpu-loras
    the flags set (vLLM refuses --max-loras above it: its --max-cpu-loras lever comes first then)."""
    before = s.config.value("--max-loras")
    current = _int(before) or _int(s.evidence.get("lora_max_adapters")) or 1
    wanted = _int(s.evidence.get("lora_adapters_requested")) or 2 * current
    cpu = _int(s.config.value("--max-cpu-loras"))
    if wanted <= current or (cpu is not None and cpu < wanted):
        return None
    return Change("--max-loras", before, str(wanted))


def _max_cpu_loras(s: Situation) -> Change | None:
    """The adapters kept in CPU memory, where the flags set fewer than the workload asks for: vLLM
    evicts the others and loads them again from disk at each turn, and refuses --max-loras above it."""
    before, wanted = s.config.value("--max-cpu-loras"), _int(s.evidence.get("lora_adapters_requested"))
    if _int(before) is None or wanted is None or wanted <= (_int(before) or 0):
        return None
    return Change("--max-cpu-loras", before, str(wanted))


def _policy(policy: str) -> Callable[[Situation], Change | None]:
    def propose(s: Situation) -> Change | None:
        if "busiest_rank" in s.evidence:
            return None  # a server's ranks out of balance: no router between them to change
        before = s.router_policy()
        return None if before in (None, policy) else Change("--router-policy", before, policy)
    return propose


def _rendering_router(s: Situation) -> Change | None:
    """smg, for an embedded fleet whose vllm-router could not read the prompts' tokens: smg's
    cache_aware matches the prompt's text itself, asking the replicas for nothing. The policy stays
    (missing_tokens is cache_aware's outcome, and smg takes that name too)."""
    if s.fleet is None or not s.fleet.embedded or s.reasons.get("prefix_aware_routing") != "missing_tokens":
        return None
    before = s.config.value("--router") or s.fleet.program.name
    return None if before == "smg" else Change("--router", before, "smg")


def _one_more_replica(s: Situation) -> Change | None:
    """The embedded fleet's replicas, or those of your own that --scale sets (as many as the level's
    evidence names, at first)."""
    if s.fleet is None or not s.fleet.resizable:
        return None
    before = int(s.config.value("--replicas") or s.fleet.replicas or len(s.evidence.get("replicas") or {}))
    return Change("--replicas", str(before), str(before + 1)) if before else None


LEVERS = (
    Lever("batch_slots", "--max-num-seqs", "the running batch sits at --max-num-seqs while requests wait for "
          "capacity and the KV cache has room", "more requests run at once, as far as the free KV cache holds the "
          f"workload's contexts (up to {BATCH_STEP} times a step)", _max_num_seqs),
    Lever("kv_cache", "--num-gpu-blocks-override", "the KV cache peaks at 90 % or more with requests waiting or "
          "preempted, and its block count is pinned", "twice the blocks: more requests fit at once", _blocks),
    Lever("kv_cache", "VLLM_CPU_KVCACHE_SPACE", "the same, on vLLM's CPU build (the embedded engine)",
          "twice the GiB of KV cache; on the CPU vLLM takes its size from this variable, which overrides "
          "--kv-cache-memory-bytes (platforms/cpu.py)", _cpu_kv_space),
    Lever("kv_cache", "--gpu-memory-utilization", "the same, on a GPU", "more of the GPU's memory for the KV "
          f"cache (0.05 a step, to {MEMORY_CEILING:g})", _gpu_memory),
    Lever("kv_cache", "--kv-cache-dtype", "the same, with the cache in 16 bits", "fp8 halves a token's KV cache "
          "where the platform has it (vLLM refuses it elsewhere, and tune says so)", _kv_dtype),
    Lever("kv_cache", "--max-model-len", "the same, with a model length far above the workload's contexts",
          "a shorter model length: twice the workload's mean context", _max_model_len),
    Lever("token_budget", "--max-num-batched-tokens", "requests wait for capacity with the batch below "
          "--max-num-seqs and the KV cache free", "a larger token budget per step admits more prefills at once",
          _token_budget),
    Lever("prefill", "--max-num-batched-tokens", "time to first token rises with the load while nothing waits for "
          "room", "larger prefill chunks per step: fewer steps to a first token", _token_budget),
    Lever("decode", "--speculative-config", "time per output token rises with the load while nothing waits for "
          "room, and the workload repeats itself", "n-gram speculation proposes tokens from the prompt; accepted "
          "ones cost no step of their own", _speculate),
    Lever("admission", "--max-num-queued-reqs", "the server refused requests with that many unfinished, more than "
          "a rejected_ratio SLO allows", "twice the requests admitted at once: more wait in the queue, and the search "
          "after says whether they keep their SLO", _admission_cap("--max-num-queued-reqs")),
    Lever("admission", "--max-num-queued-tokens", "the server refused requests with that many prompt tokens waiting "
          "for prefill", "twice the prefill backlog admitted: fewer refusals, for a longer TTFT",
          _admission_cap("--max-num-queued-tokens")),
    Lever("lora_slots", "--max-cpu-loras", "requests wait for a LoRA adapter's slot, and --max-cpu-loras is set "
          "below the adapters the workload asks for", "every adapter asked for stays in CPU memory, not evicted "
          "and loaded again from disk at its turn; vLLM refuses a --max-loras above it", _max_cpu_loras),
    Lever("lora_slots", "--max-loras", "requests wait for a LoRA adapter's slot: the adapters running fill "
          "--max-loras", "a slot for every adapter the workload asks for (twice the slots where it is unknown): "
          "their requests share the batch instead of waiting for each other's turn (each slot costs the "
          "adapter's weights in memory)", _max_loras),
    Lever("imbalance", "--router-policy", "a replica's requests wait for room while another replica has none "
          "waiting (an embedded fleet)", "power_of_two sends each request to the less loaded of two replicas, "
          "by the requests running on each", _policy("power_of_two")),
    Lever("replicas", "--replicas", "every replica of the fleet at its own limit (an embedded fleet, or your own "
          "with --scale)", "one more replica takes its share of the load", _one_more_replica),
    Lever("missed:prefix_aware_routing", "--router-policy", "prompts share prefixes, prefix caching is on, and "
          "the router spread each prefix over the replicas (an embedded fleet)", "cache_aware sends a prefix's "
          "requests to the replica that holds it, so it is prefilled once, not once per replica",
          _policy("cache_aware")),
    Lever("missed:prefix_aware_routing", "--router", "the same, where vllm-router's cache_aware could not read "
          "the prompts' tokens (its decisions missing_tokens: the replicas' /v1/chat/completions/render failed or "
          "was slow)", "smg's cache_aware matches the prompt's text itself; consistent_hash is no way out, as it "
          "needs a header shared by a prefix's requests (x-session-id) and loadwatch's workloads send only "
          "X-Request-Id, unique to each request", _rendering_router),
    Lever("missed:prefix_cache", "--enable-prefix-caching", "prompts share prefixes while the prefix cache is "
          "off or hits little", "a shared prefix is prefilled once and then found in the cache", _prefix_caching),
)

# Limits that no engine flag relieves: what would help instead.
NO_LEVER = {
    "outside_engine": "most of the time is spent before the engine sees a request (the API server's tokenising "
                      "and chat template, the network, or the client): more API server processes "
                      "(--api-server-count) or a load generator closer to the server would help, not an engine flag",
    "load_generator": "the load generator could not keep up: run more Locust processes (--processes) or hosts; "
                      "no engine flag helps",
    "slo_only": "the target exports no vLLM metrics, so what binds is unknown: give the sidecar its /metrics",
}


# The imbalance between one server's data-parallel ranks, which no flag relieves: vLLM 0.32's balancer has
# none. Its API server sends each request to the rank with the fewest waiting plus running requests
# (waiting ones weigh more once a rank's KV cache is over half full), or to the rank a request's
# X-data-parallel-rank header names (vllm/v1/engine/core_client.py, DPLBAsyncMPClient);
# --dp-sync-interval paces MoE ranks' dummy steps, not the balance.
RANKS_WHEN = "a data-parallel rank's requests wait for room while another rank of the same server has none waiting"
RANKS_NO_LEVER = ("vLLM's balancer between ranks takes no flag: it sends each request to the rank with the fewest "
                  "waiting plus running requests, unless an X-data-parallel-rank header pins it. Remove the pinning "
                  "(a router or client sending that header to one rank), or balance from outside: one API server "
                  "per rank (--data-parallel-external-lb) behind a load-aware router")


def no_lever(limit: str, evidence: dict) -> str | None:
    """Why no engine flag relieves the limit, or None where one may."""
    if limit == "imbalance" and "busiest_rank" in evidence:
        return RANKS_NO_LEVER
    return NO_LEVER.get(limit)


def applicable(limit: str, situation: Situation) -> list[tuple[Lever, Change]]:
    """The levers of the limit that apply (a fleet's whose replicas are all at their own limit: that
    limit's too, on every replica), then those of the missed items, each with its change; one change
    per flag."""
    own = [situation.evidence["replica_limit"]] if limit == "replicas" and "replica_limit" in situation.evidence \
        else []
    wanted = [limit, *own, *(f"missed:{item}" for item in situation.missed)]
    out: list[tuple[Lever, Change]] = []
    for relieves in wanted:
        for lever in LEVERS:
            if lever.relieves == relieves and all(c.flag != lever.flag for _, c in out):
                change = lever.propose(situation)
                if change is not None:
                    out.append((lever, change))
    return out
