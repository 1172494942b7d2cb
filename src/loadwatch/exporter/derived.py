"""Families the sidecar computes from one of vLLM's instead of copying it (pure).

vLLM states its KV cache's configuration as the labels of an info metric, where PromQL cannot
compute with them; the numbers become gauges (the cache's size in requests is a division away) and
the switches stay an info metric. Its sleep state is three 0/1 series; one level is what an alert
needs.
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
