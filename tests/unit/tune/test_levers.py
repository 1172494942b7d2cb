"""The lever catalogue: which levers a limit's evidence calls for, the step each takes, the
configuration after it, and the docs' table in step with the code."""

from dataclasses import replace

import yaml

from loadwatch.tune.__main__ import PAGE, render
from loadwatch.tune.config import Change, Config
from loadwatch.tune.levers import NO_LEVER, RANKS_NO_LEVER, Situation, applicable, no_lever
from loadwatch.tune.output import compose_override, kubernetes_patch, router_patch
from tests.conftest import REPO

DEFAULTS = Config()


def changes(limit: str, evidence: dict, config: Config = DEFAULTS, embedded: bool = True,
            missed: tuple[str, ...] = ()) -> list[tuple[str, str | None, str]]:
    situation = Situation(evidence, list(missed), config, embedded, kv_cache_gib=1)
    return [(c.flag, c.before, c.after) for _, c in applicable(limit, situation)]


def test_batch_slots_raise_max_num_seqs_as_far_as_the_free_kv_cache_holds():
    two = Config(("--max-num-seqs=2",))
    assert changes("batch_slots", {"max_num_seqs": 2, "kv_cache_holds_requests": 6553}, two) == [
        ("--max-num-seqs", "2", "8")]
    assert changes("batch_slots", {"max_num_seqs": 2, "kv_cache_holds_requests": 5}, two) == [
        ("--max-num-seqs", "2", "5")]
    assert changes("batch_slots", {"max_num_seqs": 2, "kv_cache_holds_requests": 2}, two) == []  # no room to grow


def test_a_full_kv_cache_grows_the_pinned_blocks_or_the_cpus_space_or_the_gpus_share():
    pinned = Config(("--num-gpu-blocks-override=20", "--max-model-len=288"))
    evidence = {"mean_context_tokens": 265}
    assert changes("kv_cache", evidence, pinned) == [("--num-gpu-blocks-override", "20", "40"),
                                                     ("--kv-cache-dtype", None, "fp8")]
    assert changes("kv_cache", evidence)[0] == ("VLLM_CPU_KVCACHE_SPACE", None, "2")
    assert changes("kv_cache", evidence, Config(env=(("VLLM_CPU_KVCACHE_SPACE", "4"),)))[0] == (
        "VLLM_CPU_KVCACHE_SPACE", "4", "8")
    on_gpu = changes("kv_cache", {"mean_context_tokens": 300}, Config(("--max-model-len", "32768")), embedded=False)
    assert on_gpu == [("--gpu-memory-utilization", None, "0.95"), ("--kv-cache-dtype", None, "fp8"),
                      ("--max-model-len", "32768", "608")]


def test_the_missed_prefix_cache_comes_after_the_limits_own_levers_and_some_limits_have_none():
    assert changes("token_budget", {}, missed=("prefix_cache",)) == [
        ("--max-num-batched-tokens", None, "4096"), ("--enable-prefix-caching", None, "true")]
    assert changes("decode", {}, Config(("--speculative-config", "{}"))) == []
    for limit in NO_LEVER:
        assert changes(limit, {}) == []


def test_a_change_replaces_every_spelling_of_its_flag():
    config = Config(("--max-num-seqs", "2", "--no-enable-prefix-caching", "--block-size=32"))
    assert config.value("--max-num-seqs") == "2" and config.value("--enable-prefix-caching") == "false"
    after = config.with_change(Change("--max-num-seqs", "2", "8")).with_change(
        Change("--enable-prefix-caching", "false", "true"))
    assert after.vllm_args == ("--block-size=32", "--max-num-seqs=8", "--enable-prefix-caching")
    env = after.with_change(Change("VLLM_CPU_KVCACHE_SPACE", None, "2"))
    assert env.command_line("m") == "VLLM_CPU_KVCACHE_SPACE=2 vllm serve m --block-size=32 --max-num-seqs=8 " \
                                    "--enable-prefix-caching"


def test_the_final_flags_as_a_compose_override_and_a_kubernetes_patch():
    config = Config(("--max-num-seqs=8",), (("VLLM_CPU_KVCACHE_SPACE", "2"),))
    assert yaml.safe_load(compose_override(config)) == {
        "services": {"vllm": {"environment": {"VLLM_CPU_KVCACHE_SPACE": "2"}}}}
    assert yaml.safe_load(kubernetes_patch(config)) == [
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--max-num-seqs=8"},
        {"op": "add", "path": "/spec/template/spec/containers/0/env/-",
         "value": {"name": "VLLM_CPU_KVCACHE_SPACE", "value": "2"}}]


def test_the_docs_table_is_the_catalogue():
    page = (REPO / PAGE).read_text()
    assert render(page) == page, "docs/guides/tune.md drifted from tune/levers.py: run `make generate`"


def test_a_fleets_router_policy_and_replicas_are_levers_of_an_embedded_fleet_only():
    from loadwatch.fleet.options import FleetOptions

    two = FleetOptions(replicas=2)

    def fleet_changes(limit: str, evidence: dict, config: Config = DEFAULTS, fleet: FleetOptions | None = two,
                      missed: tuple[str, ...] = ()) -> list[tuple[str, str | None, str]]:
        situation = Situation(evidence, list(missed), config, True, kv_cache_gib=1, fleet=fleet)
        return [(c.flag, c.before, c.after) for _, c in applicable(limit, situation)]

    assert fleet_changes("imbalance", {"replica_limit": "batch_slots"}) == [
        ("--router-policy", "round_robin", "power_of_two")]
    assert fleet_changes("outside_engine", {}, missed=("prefix_aware_routing",)) == [
        ("--router-policy", "round_robin", "cache_aware")]
    # cache_aware already, but vllm-router could not read the tokens: smg, whose cache_aware reads the text.
    renderless = Situation({}, ["prefix_aware_routing"], Config(fleet=(("--router-policy", "cache_aware"),)), True,
                           fleet=two, reasons={"prefix_aware_routing": "missing_tokens"})
    assert [(c.flag, c.before, c.after) for _, c in applicable("outside_engine", renderless)] == [
        ("--router", "vllm-router", "smg")]
    assert Config(fleet=(("--router", "smg"),)).fleet_options() == {"router": "smg"}
    for other in (replace(renderless, reasons={"prefix_aware_routing": "prefix_miss"}),  # smg would miss it too
                  replace(renderless, fleet=FleetOptions(replica=["a=http://x:1"])),  # your own router
                  replace(renderless, fleet=FleetOptions(replicas=2, router="smg"))):
        assert [c.flag for _, c in applicable("outside_engine", other)] == []
    # Every replica at its own full batch: one more replica, and each one's own lever on every replica.
    assert fleet_changes("replicas", {"replica_limit": "batch_slots", "max_num_seqs": 2,
                                      "kv_cache_holds_requests": 100}, Config(("--max-num-seqs=2",))) == [
        ("--replicas", "2", "3"), ("--max-num-seqs", "2", "8")]
    # A server's data-parallel ranks out of balance: no router between them, and no flag of vLLM's.
    ranks = {"busiest_rank": "0", "rank_limit": "batch_slots"}
    assert fleet_changes("imbalance", ranks) == []
    assert no_lever("imbalance", ranks) == RANKS_NO_LEVER and no_lever("imbalance", {}) is None
    assert no_lever("outside_engine", {}) == NO_LEVER["outside_engine"]
    # A fleet of your own is routed and scaled by you; a policy already taken is not proposed again.
    assert fleet_changes("imbalance", {}, fleet=FleetOptions(replica=["a=http://x:1"])) == []
    assert fleet_changes("imbalance", {}, fleet=FleetOptions(replicas=2, router_policy="power_of_two")) == []
    adopted = Config(("--max-num-seqs=2",)).with_change(Change("--router-policy", "round_robin", "cache_aware"))
    assert adopted.vllm_args == ("--max-num-seqs=2",) and adopted.fleet_options() == {"router_policy": "cache_aware"}
    assert adopted.value("--router-policy") == "cache_aware"
    assert adopted.with_change(Change("--max-num-seqs", "2", "8")).fleet == adopted.fleet
    assert adopted.as_dict()["fleet"] == {"--router-policy": "cache_aware"}
    assert "fleet" not in DEFAULTS.as_dict()


def test_a_fleets_final_configuration_patches_the_router_and_the_replicas_of_the_shipped_manifests():
    config = Config(("--max-num-seqs=8",), (), (("--replicas", "3"), ("--router-policy", "power_of_two")))
    assert yaml.safe_load(kubernetes_patch(config))[-1] == {"op": "replace", "path": "/spec/replicas", "value": 3}
    router = next(d for d in yaml.safe_load_all((REPO / "deploy/kubernetes/components/fleet/router.yaml").read_text())
                  if d["kind"] == "Deployment")
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    for op in yaml.safe_load(router_patch(config)):  # JSON 6902, applied as kustomize would
        index = int(op["path"].rsplit("/", 1)[1])
        if op["op"] == "test":
            assert args[index] == op["value"], "the patch's place of --policy drifted from router.yaml"
        else:
            args[index] = op["value"]
    assert args[args.index("--policy") + 1] == "power_of_two"
    assert router_patch(Config(("--max-num-seqs=8",))) is None


def test_an_admission_limit_doubles_the_cap_that_refused_where_the_configuration_sets_it():
    capped = Config(("--max-num-queued-reqs", "4", "--max-num-queued-tokens=2000"))
    assert changes("admission", {"rejections": {"max_num_queued_reqs": 30}}, capped) == [
        ("--max-num-queued-reqs", "4", "8")]
    assert changes("admission", {"rejections": {"max_num_queued_tokens": 9}}, capped) == [
        ("--max-num-queued-tokens", "2000", "4000")]
    assert changes("admission", {"rejections": {"max_num_queued_reqs": 30}}) == []  # a cap it cannot see


def test_lora_slots_raise_max_loras_to_the_workloads_adapters_and_max_cpu_loras_where_set_below():
    four = {"lora_adapters_running_peak": 1.0, "lora_max_adapters": 1.0, "lora_adapters_requested": 4}
    lora = Config(("--enable-lora", "--max-loras", "1"))
    assert changes("lora_slots", four, lora) == [("--max-loras", "1", "4")]
    # the workload's adapters unknown (no traffic split): twice the slots
    assert changes("lora_slots", {**four, "lora_adapters_requested": None}, lora) == [("--max-loras", "1", "2")]
    # --max-cpu-loras below the adapters: raised first, since vLLM refuses --max-loras above it
    pinned = Config(("--enable-lora", "--max-loras", "1", "--max-cpu-loras", "2"))
    assert changes("lora_slots", four, pinned) == [("--max-cpu-loras", "2", "4")]
    assert changes("lora_slots", {**four, "lora_max_adapters": 4.0}, Config(("--enable-lora", "--max-loras=4"))) == []
