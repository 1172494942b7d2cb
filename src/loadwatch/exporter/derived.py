"""Families the sidecar computes from one of vLLM's instead of copying it (pure).

vLLM states its KV cache's configuration as the labels of an info metric, where PromQL cannot
compute with them; the numbers become gauges (the cache's size in requests is a division away) and
the switches stay an info metric. Its sleep state is three 0/1 series; one level is what an alert
needs. Its LoRA adapters are comma-joined names in the labels of a series set to the time of each
change, every change a new series beside the old: only the latest one says where they stand now, and
PromQL cannot count names.
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily, Metric

from loadwatch.catalogue import Engine

LABELS = ("target", "model", "engine")
# gauge -> (vLLM's label, help). A label vLLM sets to "None" (unknown on this platform) gives no sample.
CACHE_NUMBERS = {
    Engine.KV_CACHE_BLOCKS: ("num_gpu_blocks", "KV cache blocks the engine allocated."),
    Engine.KV_CACHE_BLOCK_SIZE: ("block_size", "Tokens per KV cache block."),
    Engine.KV_CACHE_SIZE: ("kv_cache_size_tokens", "Tokens the KV cache holds in all."),
    Engine.KV_CACHE_MAX_CONCURRENCY: ("kv_cache_max_concurrency",
                                      "Requests of the full model length the KV cache holds at once."),
}
SLEEP_LEVELS = {"awake": 0, "weights_offloaded": 1, "discard_all": 2}


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _labels(labels: dict[str, str], target: str, models: dict[str, str]) -> list[str]:
    engine = labels.get("engine", "")
    return [target, labels.get("model_name") or models.get(engine, ""), engine]


def cache_config(info: Metric, target: str, models: dict[str, str]) -> list[Metric]:
    """`models`: each engine's model, from its other families: vLLM's info metric names none."""
    numbers = {name: GaugeMetricFamily(name, help_text, labels=LABELS)
               for name, (_, help_text) in CACHE_NUMBERS.items()}
    switches = GaugeMetricFamily(Engine.CACHE_CONFIG_INFO, "The KV cache's switches: prefix caching on or off, "
                                                           "and the cache's data type.",
                                 labels=[*LABELS, "prefix_caching", "cache_dtype"])
    for sample in info.samples:
        labels = sample.labels
        values = {name: _number(labels.get(label)) for name, (label, _) in CACHE_NUMBERS.items()}
        blocks, block_size = values[Engine.KV_CACHE_BLOCKS], values[Engine.KV_CACHE_BLOCK_SIZE]
        if values[Engine.KV_CACHE_SIZE] is None and blocks is not None and block_size is not None:
            values[Engine.KV_CACHE_SIZE] = blocks * block_size  # versions before 0.11 state only the factors
        for name, value in values.items():
            if value is not None:
                numbers[name].add_metric(_labels(labels, target, models), value)
        if "enable_prefix_caching" in labels:
            switches.add_metric([*_labels(labels, target, models), labels["enable_prefix_caching"].lower(),
                                 labels.get("cache_dtype", "")], 1.0)
    return [f for f in (*numbers.values(), switches) if f.samples]


def sleep_level(state: Metric, target: str, models: dict[str, str]) -> list[Metric]:
    """0 awake, 1 weights offloaded, 2 everything discarded: the deepest state vLLM marks 1."""
    level = GaugeMetricFamily(Engine.SLEEP_LEVEL, "The engine's sleep: 0 awake, 1 weights offloaded (sleep level "
                                                  "1), 2 weights and KV cache discarded (level 2).", labels=LABELS)
    deepest: dict[tuple[str, ...], int] = {}
    for sample in state.samples:
        key = tuple(_labels(sample.labels, target, models))
        name = sample.labels.get("sleep_state", "")
        if name in SLEEP_LEVELS and sample.value == 1 and SLEEP_LEVELS[name] >= deepest.get(key, 0):
            deepest[key] = SLEEP_LEVELS[name]
        else:
            deepest.setdefault(key, 0)
    for key, value in deepest.items():
        level.add_metric(list(key), float(value))
    return [level] if level.samples else []


def _names(joined: str) -> list[str]:
    return [name for name in joined.split(",") if name]


def lora_adapters(info: Metric, target: str, models: dict[str, str]) -> list[Metric]:
    """vllm:lora_requests_info's latest series (the greatest value: vLLM sets each to the time it
    changed, and the earlier ones linger) as three counts: adapters running, adapters waiting, and
    max_lora (--max-loras). vLLM 0.32 lists the adapters of the requests it scheduled under both
    labels (its LoRARequestStates fills both from one loop, and a request's QUEUED event reaches the
    front end only with its SCHEDULED one), so there both count the adapters running."""
    families = {
        Engine.LORA_ADAPTERS_RUNNING: GaugeMetricFamily(
            Engine.LORA_ADAPTERS_RUNNING, "LoRA adapters vLLM lists as running (vllm:lora_requests_info's "
            "running_lora_adapters).", labels=LABELS),
        Engine.LORA_ADAPTERS_WAITING: GaugeMetricFamily(
            Engine.LORA_ADAPTERS_WAITING, "LoRA adapters vLLM lists as waiting (vllm:lora_requests_info's "
            "waiting_lora_adapters; vLLM 0.32 lists the running ones there too).", labels=LABELS),
        Engine.LORA_MAX_ADAPTERS: GaugeMetricFamily(
            Engine.LORA_MAX_ADAPTERS, "LoRA adapters one batch holds (--max-loras, vllm:lora_requests_info's "
            "max_lora).", labels=LABELS),
    }
    # vLLM's series name no engine (one per server, data-parallel ranks summed): the model is the
    # server's own where all its engines serve one.
    served = set(models.values())
    model = {"": served.pop()} if len(served) == 1 else {}
    latest: dict[tuple[str, ...], dict[str, str]] = {}
    stamps: dict[tuple[str, ...], float] = {}
    for sample in info.samples:
        key = tuple(_labels(sample.labels, target, {**models, **model}))
        if sample.value >= stamps.get(key, float("-inf")):
            latest[key], stamps[key] = sample.labels, sample.value
    for key, labels in latest.items():
        for name, label in ((Engine.LORA_ADAPTERS_RUNNING, "running_lora_adapters"),
                            (Engine.LORA_ADAPTERS_WAITING, "waiting_lora_adapters")):
            families[name].add_metric(list(key), float(len(_names(labels.get(label, "")))))
        limit = _number(labels.get("max_lora"))
        if limit is not None:
            families[Engine.LORA_MAX_ADAPTERS].add_metric(list(key), limit)
    return [f for f in families.values() if f.samples]
