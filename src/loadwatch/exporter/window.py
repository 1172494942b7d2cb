"""Peaks and ratios over the sidecar's own sampling window (pure functions of snapshots).

A 15 s Prometheus scrape sees one instant of a gauge; sampling every second and exposing the
window's peak shows saturation that falls between scrapes. Ratios are of counter increases over
the window, so they describe recent traffic rather than everything since the engine started.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import GaugeMetricFamily

from loadwatch.catalogue import Engine
from loadwatch.exporter.normalize import EngineKey, Snapshot

LABELS = ("target", "model", "engine")


def _labels(target: str, key: EngineKey) -> list[str]:
    return [target, key[0], key[1]]


def _increase(window: Sequence[Snapshot], name: str, key: EngineKey) -> float | None:
    first, last = window[0].value(name, key), window[-1].value(name, key)
    if first is None or last is None or last < first:  # absent, or the engine restarted
        return None
    return last - first


def _keys(window: Sequence[Snapshot], name: str) -> set[EngineKey]:
    return set(window[-1].values.get(name, {}))


def peaks(window: Sequence[Snapshot], target: str) -> list[GaugeMetricFamily]:
    out = []
    for name, out_name, help_text in (
            ("kv_cache_usage_ratio", Engine.KV_CACHE_USAGE_MAX, "Peak KV cache usage over the sampling window, 0-1."),
            ("requests_waiting", Engine.REQUESTS_WAITING_MAX, "Peak of waiting requests over the sampling window.")):
        family = GaugeMetricFamily(out_name, help_text, labels=LABELS)
        for key in sorted(_keys(window, name)):
            seen = [v for s in window if (v := s.value(name, key)) is not None]
            family.add_metric(_labels(target, key), max(seen))
        out.append(family)
    return out


def ratios(window: Sequence[Snapshot], target: str) -> list[GaugeMetricFamily]:
    hit = GaugeMetricFamily(Engine.PREFIX_CACHE_HIT_RATIO,
                            "Prefix-cache hits / queries over the sampling window.", labels=LABELS)
    acceptance = GaugeMetricFamily(Engine.SPEC_ACCEPTANCE_RATIO,
                                   "Accepted / proposed draft tokens over the sampling window.", labels=LABELS)
    length = GaugeMetricFamily(Engine.SPEC_MEAN_ACCEPTANCE_LENGTH,
                               "1 + accepted tokens / drafts over the sampling window.", labels=LABELS)
    last = window[-1]
    for key in sorted(_keys(window, "prefix_cache_queries") | _keys(window, "v0_prefix_hit_rate")):
        queries = _increase(window, "prefix_cache_queries", key)
        hits = _increase(window, "prefix_cache_hits", key)
        if queries and hits is not None:
            hit.add_metric(_labels(target, key), hits / queries)
        elif (rate := last.value("v0_prefix_hit_rate", key)) is not None:
            hit.add_metric(_labels(target, key), rate)
    for key in sorted(_keys(window, "spec_decode_draft_tokens") | _keys(window, "v0_spec_acceptance_rate")):
        drafted = _increase(window, "spec_decode_draft_tokens", key)
        accepted = _increase(window, "spec_decode_accepted_tokens", key)
        if drafted and accepted is not None:
            acceptance.add_metric(_labels(target, key), accepted / drafted)
            drafts = _increase(window, "spec_decode_drafts", key)
            if drafts:
                length.add_metric(_labels(target, key), 1 + accepted / drafts)
        elif (rate := last.value("v0_spec_acceptance_rate", key)) is not None:
            acceptance.add_metric(_labels(target, key), rate)
    return [f for f in (hit, acceptance, length) if f.samples]
