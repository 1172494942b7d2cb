"""One vLLM /metrics payload in, loadwatch's engine families out (pure; tested per vLLM version)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from loadwatch.exporter.derived import cache_config, lora_adapters, sleep_level
from loadwatch.exporter.schema import (
    CACHE_CONFIG,
    FAMILIES,
    LORA_INFO,
    SLEEP_STATE,
    V0_PREFIX_HIT_RATE,
    V0_SPEC_ACCEPTANCE_RATE,
    wanted_names,
)

_WANTED = wanted_names()
EngineKey = tuple[str, str]  # (model, engine)


def keep(line: str) -> bool:
    """Whether a payload line belongs to a family we read (cheap, before the real parser)."""
    if line.startswith("#"):
        parts = line.split(" ", 3)
        return len(parts) > 2 and parts[2] in _WANTED
    end = len(line)
    for stop in ("{", " "):
        at = line.find(stop)
        if 0 <= at < end:
            end = at
    return line[:end] in _WANTED


@dataclass
class Snapshot:
    """What one sample of one target said, normalised."""

    families: dict[str, Metric] = field(default_factory=dict)
    # Per (model, engine), the values the sampler's windows are computed from.
    values: dict[str, dict[EngineKey, float]] = field(default_factory=dict)

    def value(self, name: str, key: EngineKey) -> float | None:
        return self.values.get(name, {}).get(key)


def engine_labels(labels: dict[str, str], target: str) -> dict[str, str]:
    out = {"target": target, "model": labels.get("model_name", "")}
    if "engine" in labels:
        out["engine"] = labels["engine"]
    out.update((k, v) for k, v in labels.items() if k not in ("model_name", "engine"))
    return out


def key_of(labels: dict[str, str]) -> EngineKey:
    return (labels.get("model", ""), labels.get("engine", ""))


def normalize(text: str, target: str) -> Snapshot:
    """Raises ValueError when the payload is not vLLM's metrics in the Prometheus text format."""
    filtered = "\n".join(line for line in text.splitlines() if keep(line))
    parsed = {family.name: family for family in text_string_to_metric_families(filtered + "\n")}
    snapshot = Snapshot()
    for family in FAMILIES:
        source = next((parsed[name] for name in family.sources if name in parsed), None)
        if source is None or (family.moving_only and not any(s.value for s in source.samples)):
            continue
        out_name = family.name
        metric = Metric(out_name, family.help, family.kind)
        totals: dict[EngineKey, float] = {}
        for sample in source.samples:
            if sample.name.endswith("_created"):
                continue
            suffix = sample.name[len(source.name):]
            labels = engine_labels(sample.labels, target)
            metric.add_sample(out_name + suffix, labels, sample.value)
            if family.kind != "histogram":
                key = key_of(labels)
                totals[key] = totals.get(key, 0.0) + sample.value
        snapshot.families[out_name] = metric
        if family.kind != "histogram":
            snapshot.values[family.key] = totals
    models = {engine: model for totals in snapshot.values.values() for model, engine in totals if model}
    for source_name, derive in ((CACHE_CONFIG, cache_config), (SLEEP_STATE, sleep_level),
                               (LORA_INFO, lora_adapters)):
        if source_name in parsed:
            snapshot.families.update((f.name, f) for f in derive(parsed[source_name], target, models))
    if not snapshot.families:
        raise ValueError("no vLLM metrics in the payload (is this a vLLM /metrics endpoint?)")
    for name, fallback in (("v0_prefix_hit_rate", V0_PREFIX_HIT_RATE),
                           ("v0_spec_acceptance_rate", V0_SPEC_ACCEPTANCE_RATE)):
        if fallback in parsed:
            snapshot.values[name] = {
                key_of(engine_labels(s.labels, target)): s.value for s in parsed[fallback].samples
            }
    return snapshot
