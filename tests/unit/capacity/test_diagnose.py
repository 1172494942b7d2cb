"""The binding limit named from the engine's own words, the room it had in requests, and what the
run missed."""

import pytest

from loadwatch.capacity.command import inferred_batch, shared_prefix
from loadwatch.capacity.diagnose import diagnose
from loadwatch.capacity.levels import Level
from loadwatch.capacity.output import conclusion, markdown
from loadwatch.capacity.room import Batch, room, sentence
from loadwatch.workloads.datasets import SharedPrefix

KV = {"kv_cache_usage_peak": 0.99, "requests_waiting_peak": 12.0, "requests_running_peak": 6.0, "preemptions": 3.0,
      "requests_waiting_capacity_peak": 12.0, "requests_waiting_deferred_peak": 0.0, "engine_mean_ttft_ms": 900.0}
ROOMY = {**KV, "kv_cache_usage_peak": 0.4, "preemptions": 0.0}
IDLE_QUEUE = {**ROOMY, "requests_waiting_peak": 0.0, "requests_waiting_capacity_peak": 0.0}
SIX = Batch(6, "the embedded engine's flags")
CLIENT = {"mean_ttft_ms": 1000.0}


def broke(*names: str) -> dict:
    return {**CLIENT, "slo": [{"name": n, "passed": False} for n in names]}


@pytest.mark.parametrize(("engine", "results", "saturated", "batch", "limit"), [
    (KV, CLIENT, {}, SIX, "kv_cache"),
    (ROOMY, CLIENT, {}, SIX, "batch_slots"),
    (ROOMY, CLIENT, {}, Batch(128, "vLLM's default"), "token_budget"),
    (ROOMY, CLIENT, {}, None, "token_budget"),  # --max-num-seqs unknown, none inferred: not shown to be full
    ({**IDLE_QUEUE, "prefill_time_share": 0.2, "decode_time_share": 0.7}, broke("ttft_p99_ms"), {}, SIX, "prefill"),
    ({**IDLE_QUEUE, "prefill_time_share": 0.7, "decode_time_share": 0.2}, broke("tpot_p90_ms"), {}, SIX, "decode"),
    ({**IDLE_QUEUE, "prefill_time_share": 0.7, "decode_time_share": 0.2}, broke("e2el_p99_ms"), {}, SIX, "prefill"),
    ({**IDLE_QUEUE, "engine_mean_ttft_ms": 100.0}, CLIENT, {}, SIX, "outside_engine"),
    ({k: None for k in KV}, CLIENT, {}, None, "slo_only"),
    (IDLE_QUEUE, CLIENT, {"0": "it used 99% of a CPU core"}, SIX, "load_generator"),
    (KV, CLIENT, {"0": "it used 99% of a CPU core"}, SIX, "kv_cache"),  # the engine's evidence first
])
def test_the_binding_limit_follows_the_evidence(engine, results, saturated, batch, limit):
    diagnosis = diagnose(results, engine, saturated, batch)
    assert diagnosis.limit == limit and diagnosis.evidence


def test_57_running_of_128_allowed_with_the_cache_nearly_empty_is_the_token_budget_not_batch_slots():
    """The case found by hand: 512-token shared prefixes, 57 running at most, 67 waiting, KV cache 1.5 %,
    on an engine whose --max-num-seqs is vLLM's CPU default of 128."""
    engine = {"kv_cache_usage_peak": 0.015, "requests_waiting_peak": 67.0, "requests_running_peak": 57.0,
              "requests_waiting_capacity_peak": 67.0, "requests_waiting_deferred_peak": 0.0, "preemptions": 0.0}
    diagnosis = diagnose(CLIENT, engine, {}, Batch(128, "the embedded engine's flags"))
    assert diagnosis.limit == "token_budget"
    assert diagnosis.evidence["max_num_seqs"] == 128 and diagnosis.evidence["requests_running_peak"] == 57


def test_deferred_requests_are_not_a_capacity_limit_and_old_versions_wait_for_capacity():
    deferred = {**IDLE_QUEUE, "requests_waiting_peak": 9.0, "requests_waiting_deferred_peak": 9.0,
                "prefill_time_share": 0.6, "decode_time_share": 0.3}
    assert diagnose(CLIENT, deferred, {}, SIX).limit == "prefill"
    old = {**ROOMY, "requests_waiting_capacity_peak": None, "requests_waiting_deferred_peak": None}
    assert diagnose(CLIENT, old, {}, SIX).limit == "batch_slots"
    # Waiting seen by the sidecar's 1 s sampling between two scrapes that saw no reason: capacity.
    between = {**ROOMY, "requests_waiting_capacity_peak": 0.0}
    assert diagnose(CLIENT, between, {}, SIX).limit == "batch_slots"


RESULTS = {"completed": 10, "total_input_tokens": 1500, "total_output_tokens": 500}  # 200 tokens a request


def test_the_kv_cache_holds_whole_blocks_per_request_and_a_shared_prefix_once():
    engine = {"kv_cache_blocks": 20.0, "kv_cache_block_size": 32.0, "prefix_caching": 0}
    off = room(RESULTS, engine, SIX, SharedPrefix(128, 1))
    assert off["mean_context_tokens"] == 200 and off["blocks_per_request"] == 7  # ceil(200 / 32)
    assert off["kv_cache_holds_requests"] == 2  # 19 usable blocks (one is vLLM's null block) // 7
    on = room(RESULTS, {**engine, "prefix_caching": 1}, SIX, SharedPrefix(128, 1))
    assert on["shared_prefix_blocks"] == 4 and on["blocks_per_request"] == 3 and on["kv_cache_holds_requests"] == 5
    text = sentence(on)
    assert text.startswith("The KV cache holds 5 requests at the workload's mean context of 200 tokens (20 blocks "
                           "of 32 tokens, 3 a request, after the 4 blocks of the shared prefix held once)")
    assert "the batch allows 6 (--max-num-seqs, the embedded engine's flags)" in text
    unknown = room({}, {}, None, None)
    assert unknown["kv_cache_holds_requests"] is None and sentence(unknown) is None


def test_a_shared_prefix_with_caching_off_or_rarely_hit_is_missed_and_a_well_hit_one_is_not():
    results = {"completed": 10, "total_input_tokens": 6000, "total_output_tokens": 1000}  # 600-token prompts
    prefix = SharedPrefix(512, 1)
    off = diagnose(results, {**ROOMY, "kv_cache_block_size": 128.0, "prefix_caching": 0}, {}, SIX, prefix)
    (item,) = off.missed
    assert item["item"] == "prefix_cache" and "prefix caching is off" in item["explanation"]
    assert item["evidence"]["shared_prefix_tokens"] == 512
    low = {**ROOMY, "kv_cache_block_size": 128.0, "prefix_caching": 1, "prompt_tokens_cached_share": 0.05}
    assert diagnose(results, low, {}, SIX, prefix).missed[0]["item"] == "prefix_cache"
    hit = {**low, "prompt_tokens_cached_share": 0.8}
    assert diagnose(results, hit, {}, SIX, prefix).missed == []
    assert diagnose(results, {**low, "kv_cache_block_size": 1024.0}, {}, SIX, prefix).missed == []  # < a block
    assert diagnose(results, low, {}, SIX, None).missed == []


def test_the_prefix_is_read_from_the_workload_the_results_record():
    assert shared_prefix({"options": {"dataset": "random", "prefix_len": 512}}) == SharedPrefix(512, 1)
    assert shared_prefix({"options": {"dataset": "prefix-repetition", "prefix_len": 0, "num_prefixes": 4}}) \
        == SharedPrefix(256, 4)
    assert shared_prefix({"options": {"dataset": "random", "prefix_len": 0}}) is None
    assert shared_prefix({"options": {"dataset": "no-such"}}) is None and shared_prefix({}) is None


def _level(value: float, running: float, waiting: float) -> Level:
    return Level(int(value), value, "users", f"level-{int(value):02d}",
                 engine={"requests_running_peak": running, "requests_waiting_peak": waiting})


def test_a_running_batch_that_plateaus_while_requests_wait_is_inferred_and_said_to_be():
    batch = inferred_batch([_level(2, 2, 0), _level(4, 4, 0), _level(8, 6, 0), _level(16, 6, 9)])
    assert batch is not None and batch.max_num_seqs == 6 and batch.source.startswith("inferred")
    assert inferred_batch([_level(2, 2, 0), _level(4, 4, 3)]) is None  # still growing
    assert inferred_batch([_level(2, 6, 0), _level(4, 6, 0)]) is None  # nothing waited


def test_the_report_gives_the_room_and_the_missed_items():
    results = {"completed": 10, "total_input_tokens": 6000, "total_output_tokens": 1000}
    engine = {**ROOMY, "kv_cache_blocks": 40.0, "kv_cache_block_size": 128.0, "prefix_caching": 0}
    diagnosis = diagnose(results, engine, {}, SIX, SharedPrefix(512, 1))
    result = conclusion("users", "users", [], 4.0, diagnosis, 0.8, "rule")
    assert (result.room or "").startswith("The KV cache holds 6 requests at the workload's mean context of 700 "
                                          "tokens")
    assert result.missed[0].item == "prefix_cache"
    text = markdown(result.model_copy(update={"request_throughput_at_max": 1.0, "output_throughput_at_max": 10.0}))
    assert "The KV cache holds 6 requests" in text and "Missed: **prefix cache**" in text


def test_a_full_batch_whose_throughput_stopped_growing_with_it_is_compute_not_batch_slots():
    """tune's worked example (docs/guides/tune.md): 128 running of --max-num-seqs 128 with requests
    waiting, but the batch grew from 96 to 128 running while the output throughput stayed flat; a
    bigger batch (512) then made TTFT p90 86.7 % worse. On 2 cores the engine's steps only lengthened."""
    full = {"kv_cache_usage_peak": 0.3, "requests_waiting_peak": 10.0, "requests_running_peak": 128.0,
            "requests_waiting_capacity_peak": 10.0, "requests_waiting_deferred_peak": 0.0, "preemptions": 0.0,
            "prefill_time_share": 0.55, "decode_time_share": 0.4}
    at_knee = {**broke("ttft_p90_ms"), "output_throughput": 505.0}
    below = ({"output_throughput": 500.0}, {**full, "requests_running_peak": 96.0, "requests_waiting_peak": 0.0})
    diagnosis = diagnose(at_knee, full, {}, Batch(128, "the embedded engine's flags"), below=below)
    assert diagnosis.limit == "prefill"
    assert diagnosis.evidence["batch_full"] is True
    assert (diagnosis.evidence["requests_running_peak_below"], diagnosis.evidence["output_throughput_below"]) == \
        (96.0, 500.0)
    # The throughput grew with the batch: the slots bind, as before.
    grew = diagnose({**at_knee, "output_throughput": 650.0}, full, {}, Batch(128, "flags"), below=below)
    assert grew.limit == "batch_slots"
    # The batch barely grew from the level below: nothing to judge by, the slots bind.
    barely = ({"output_throughput": 500.0}, {**full, "requests_running_peak": 120.0})
    assert diagnose(at_knee, full, {}, Batch(128, "flags"), below=barely).limit == "batch_slots"
    assert diagnose(at_knee, full, {}, Batch(128, "flags")).limit == "batch_slots"


def test_a_full_batch_is_credited_with_what_it_served_at_a_level_that_held():
    """tune on the embedded engine, 2026-11-27, after --max-num-seqs 8: 4 users ran 4 (5.2 req/s),
    16 users held with 8 running (9.5 req/s), and the decisive 17 users, cut short once clearly lost,
    measured 5.9 req/s while its queue filled. Against that figure the batch of 8 seemed to serve no
    more than the batch of 4, and the search named compute; 16 users' figure shows the slots bind."""
    full = {"kv_cache_usage_peak": 0.01, "requests_waiting_peak": 11.0, "requests_running_peak": 8.0,
            "requests_waiting_capacity_peak": 11.0, "requests_waiting_deferred_peak": 0.0, "preemptions": 0.0,
            "prefill_time_share": 0.3, "decode_time_share": 0.7}
    at_knee = {**broke("ttft_p90_ms"), "output_throughput": 5.9 * 200}
    below = ({"output_throughput": 5.2 * 200}, {**full, "requests_running_peak": 4.0, "requests_waiting_peak": 0.0})
    assert diagnose(at_knee, full, {}, Batch(8, "flags"), below=below).limit == "prefill"
    credited = diagnose(at_knee, full, {}, Batch(8, "flags"), below=below, full_served=9.5 * 200)
    assert credited.limit == "batch_slots"


def peaks(waiting: float, running: float, kv: float = 0.2) -> dict:
    return {"requests_waiting_peak": waiting, "requests_waiting_capacity_peak": waiting,
            "requests_waiting_deferred_peak": 0.0, "requests_running_peak": running, "kv_cache_usage_peak": kv}


def test_a_fleet_with_one_replica_queueing_while_another_has_room_is_imbalance_with_that_replicas_own_limit():
    """The imbalance scenario (benchmarks/fleet.py): b started with --max-num-seqs=1 behind round robin."""
    from loadwatch.capacity.diagnose import ReplicaState

    replicas = {"a": ReplicaState(peaks(0.0, 4.0), Batch(128, "flags")),
                "b": ReplicaState(peaks(6.0, 1.0), Batch(1, "inferred"))}
    engine = {**ROOMY, **peaks(6.0, 4.0)}
    diagnosis = diagnose(CLIENT, engine, {}, Batch(128, "flags"), replicas=replicas)
    assert diagnosis.limit == "imbalance"
    evidence = diagnosis.evidence
    assert (evidence["busiest_replica"], evidence["replica_limit"]) == ("b", "batch_slots")
    assert evidence["replicas_queueing"] == ["b"] and evidence["replicas_with_room"] == ["a"]
    assert evidence["replicas"]["b"]["requests_waiting_peak"] == 6.0


def test_a_fleet_queueing_everywhere_is_replicas_and_time_lost_outside_the_engines_stays_outside_engine():
    from loadwatch.capacity.diagnose import ReplicaState

    both = {"a": ReplicaState(peaks(3.0, 6.0), SIX), "b": ReplicaState(peaks(5.0, 6.0), SIX)}
    diagnosis = diagnose(CLIENT, {**ROOMY, **peaks(5.0, 6.0)}, {}, SIX, replicas=both)
    assert (diagnosis.limit, diagnosis.evidence["replica_limit"]) == ("replicas", "batch_slots")
    idle = {name: ReplicaState(peaks(0.0, 1.0)) for name in ("a", "b")}
    slow_router = diagnose(CLIENT, {**IDLE_QUEUE, "engine_mean_ttft_ms": 100.0}, {}, SIX, replicas=idle)
    assert slow_router.limit == "outside_engine" and set(slow_router.evidence["replicas"]) == {"a", "b"}
    one = diagnose(CLIENT, ROOMY, {}, SIX, replicas={"a": ReplicaState(peaks(12.0, 6.0), SIX)})
    assert one.limit == "batch_slots", "one target is no fleet"


def test_a_fleet_that_spread_each_prefix_over_its_replicas_missed_prefix_aware_routing():
    from loadwatch.report.fleet import prefix_affinity

    # Round robin: each of 4 prefixes' requests alternate over a and b; a prefix-aware router: one each.
    spread = [{"prefix": i % 4, "replica": "ab"[(i // 4) % 2], "stage": "load"} for i in range(80)]
    pinned = [{"prefix": i % 4, "replica": "ab"[(i % 4) // 2], "stage": "load"} for i in range(80)]
    assert prefix_affinity(spread) == {"prefixes_seen": 4, "replicas": 2, "top_replica_share": 0.5}
    assert prefix_affinity(pinned)["top_replica_share"] == 1.0
    assert prefix_affinity([{"replica": "a"}]) is None, "a workload without shared prefixes says nothing"
    engine = {**ROOMY, "prefix_caching": 1, "kv_cache_block_size": 16, "prompt_tokens_cached_share": 0.6}
    results = {**CLIENT, "total_input_tokens": 10_000, "completed": 20}
    four = SharedPrefix(256, 4)
    (item,) = diagnose(results, engine, {}, SIX, four, affinity=prefix_affinity(spread)).missed
    assert item["item"] == "prefix_aware_routing" and item["evidence"]["top_replica_share"] == 0.5
    assert "spread each prefix's requests over the 2 replicas (50% of a prefix's requests on its most-used replica)" \
        in item["explanation"]
    assert diagnose(results, engine, {}, SIX, four, affinity=prefix_affinity(pinned)).missed == []
    # One prefix for two replicas: nothing to route by.
    assert diagnose(results, engine, {}, SIX, SharedPrefix(256, 1), affinity=prefix_affinity(spread)).missed == []


def test_missed_prefix_aware_routing_and_an_imbalance_say_the_routers_reason():
    from loadwatch.capacity.diagnose import ReplicaState
    from loadwatch.report.routing import reasons

    engine = {**ROOMY, "prefix_caching": 1, "kv_cache_block_size": 16, "prompt_tokens_cached_share": 0.6}
    results = {**CLIENT, "total_input_tokens": 10_000, "completed": 20}
    spread = {"prefixes_seen": 4, "replicas": 2, "top_replica_share": 0.5}
    renderless = reasons({"policy": "cache_aware", "sent": {"a": 9.0, "b": 11.0},
                          "outcomes": {"missing_tokens": 20.0}}, ("X-Request-Id",))
    (item,) = diagnose(results, engine, {}, SIX, SharedPrefix(256, 4), affinity=spread, routing=renderless).missed
    assert item["evidence"]["routing_reason"] == "missing_tokens"
    assert item["evidence"]["prefix_decisions"] == {"missing_tokens": 20}
    assert "it did not because the router could not read the prompts' tokens" in item["explanation"]
    # Routed by load, idle replicas tie and the first one takes most: no prefix held, whatever the share.
    piled = {**spread, "top_replica_share": 0.83}
    (item,) = diagnose(results, engine, {}, SIX, SharedPrefix(256, 4), affinity=piled, routing=renderless).missed
    assert item["item"] == "prefix_aware_routing" and "routed 100% of its prefix-aware decisions by load" \
        in item["explanation"]
    held = reasons({"policy": "cache_aware", "sent": {}, "outcomes": {"prefix_hit": 18.0, "prefix_miss": 2.0}}, ())
    assert diagnose(results, engine, {}, SIX, SharedPrefix(256, 4), affinity=piled, routing=held).missed == []
    keyless = reasons({"policy": "consistent_hash", "sent": {"a": 20.0, "b": 0.0}, "outcomes": {}}, ())
    one_busy = {"a": ReplicaState(peaks(12.0, 6.0), SIX), "b": ReplicaState(peaks(0.0, 0.0), SIX)}
    diagnosis = diagnose(CLIENT, {**ROOMY, **peaks(12.0, 6.0)}, {}, SIX, replicas=one_busy, routing=keyless)
    assert diagnosis.limit == "imbalance" and diagnosis.evidence["routing_reason"] == "no_hash_key"
    assert "x-session-id" in diagnosis.evidence["why"]
    plain = diagnose(CLIENT, {**ROOMY, **peaks(12.0, 6.0)}, {}, SIX, replicas=one_busy, routing=renderless)
    assert "routing_reason" not in plain.evidence, "routing by load is not a key-less hash's collapse"


def test_a_batch_sampled_a_few_short_of_its_limit_is_full():
    """The tune guide's prefix scenario rerun (2026-11-27): the level that broke read 125 running of
    128 (the sidecar samples once a second, between a request's end and the next one's admission),
    with requests waiting for room; from 64 running at 64 users the output fell from 2,153 to 1,676
    tok/s: a full batch, compute-bound, not a token budget."""
    engine = {"kv_cache_usage_peak": 0.04, "requests_waiting_peak": 82.0, "requests_running_peak": 125.0,
              "requests_waiting_capacity_peak": 13.0, "requests_waiting_deferred_peak": 0.0, "preemptions": 0.0,
              "prefill_time_share": 0.6, "decode_time_share": 0.3}
    below = ({"output_throughput": 2153.0}, {**engine, "requests_running_peak": 64.0})
    at_knee = {**broke("ttft_p90_ms"), "output_throughput": 1676.0}
    assert diagnose(at_knee, engine, {}, Batch(128, "vLLM's default"), below=below).limit == "prefill"
    # Well short of it (57 of 128, as the token-budget case above): not full.
    short = {**engine, "requests_running_peak": 57.0}
    assert diagnose(at_knee, short, {}, Batch(128, "vLLM's default"), below=below).limit == "token_budget"


# 4 adapters asked for, --max-loras 1 (as vLLM 0.32 showed it: the one adapter running is also listed as
# waiting, the others not at all), and the scheduler deferred the other adapters' requests.
LORA = {**ROOMY, "requests_waiting_capacity_peak": 0.0, "requests_waiting_deferred_peak": 3.0,
        "requests_waiting_peak": 3.0, "lora_adapters_running_peak": 1.0, "lora_adapters_waiting_peak": 1.0,
        "lora_max_adapters": 1.0}
SPLIT = {**CLIENT, "models": {f"lora-{i}": {} for i in range(1, 5)}}


def test_requests_deferred_while_the_adapters_running_fill_max_loras_name_lora_slots():
    diagnosis = diagnose(SPLIT, LORA, {}, SIX)
    assert diagnosis.limit == "lora_slots"
    assert {k: diagnosis.evidence[k] for k in ("lora_adapters_running_peak", "lora_max_adapters",
                                               "lora_adapters_requested", "requests_waiting_deferred_peak")} == {
        "lora_adapters_running_peak": 1.0, "lora_max_adapters": 1.0, "lora_adapters_requested": 4,
        "requests_waiting_deferred_peak": 3.0}
    assert "--max-loras" in diagnosis.explanation


@pytest.mark.parametrize("change", [
    {"lora_max_adapters": 4.0},  # a slot to spare: not the adapters' slots
    {"requests_waiting_deferred_peak": 0.0, "requests_waiting_peak": 0.0},  # nothing deferred
    {"lora_max_adapters": None, "lora_adapters_running_peak": None, "lora_adapters_waiting_peak": None},  # no LoRA
])
def test_without_the_slots_full_and_deferred_requests_it_is_not_lora_slots(change):
    assert diagnose(SPLIT, {**LORA, **change}, {}, SIX).limit != "lora_slots"


def test_a_servers_rank_queueing_while_another_rank_has_room_is_imbalance_with_each_ranks_peaks():
    """vllm serve --data-parallel-size 2 with every request pinned to rank 0 (X-data-parallel-rank):
    the server's totals say batch_slots; its ranks say one queued while the other had room."""
    from loadwatch.capacity.diagnose import ReplicaState

    ranks = {"vllm": {"0": ReplicaState(peaks(6.0, 6.0), SIX), "1": ReplicaState(peaks(0.0, 0.0), SIX)}}
    diagnosis = diagnose(CLIENT, {**ROOMY, **peaks(6.0, 6.0)}, {}, SIX, ranks=ranks)
    assert diagnosis.limit == "imbalance"
    evidence = diagnosis.evidence
    assert (evidence["server"], evidence["busiest_rank"], evidence["rank_limit"]) == ("vllm", "0", "batch_slots")
    assert evidence["ranks_queueing"] == ["0"] and evidence["ranks_with_room"] == ["1"]
    assert evidence["ranks"]["vllm"]["0"]["requests_waiting_peak"] == 6.0
    assert evidence["ranks"]["vllm"]["1"]["requests_running_peak"] == 0.0


def test_ranks_queueing_alike_keep_the_servers_limit_with_each_ranks_peaks_beside_it():
    from loadwatch.capacity.diagnose import ReplicaState

    both = {"vllm": {"0": ReplicaState(peaks(5.0, 6.0), SIX), "1": ReplicaState(peaks(4.0, 6.0), SIX)}}
    diagnosis = diagnose(CLIENT, {**ROOMY, **peaks(5.0, 6.0)}, {}, SIX, ranks=both)
    assert diagnosis.limit == "batch_slots"
    assert set(diagnosis.evidence["ranks"]["vllm"]) == {"0", "1"} and "busiest_rank" not in diagnosis.evidence
    # A fleet's replicas out of balance stay the fleet's verdict: its ranks are not asked over it.
    replicas = {"a": ReplicaState(peaks(6.0, 6.0), SIX), "b": ReplicaState(peaks(0.0, 1.0), SIX)}
    fleet = diagnose(CLIENT, {**ROOMY, **peaks(6.0, 6.0)}, {}, SIX, replicas=replicas, ranks=both)
    assert fleet.limit == "imbalance" and fleet.evidence["busiest_replica"] == "a"
