"""The engine's state for the web UI's charts: the master reads --engine-metrics (the sidecar's
/metrics, or vLLM's own) on its own schedule, never in a request's path.

A reading is a few gauges now (KV cache usage, running and waiting requests, and why they wait;
each data-parallel rank's on a server of several)
and ratios over the time since the previous reading (prefix-cache hits, the share of prompt tokens
served from cache, spec-decode acceptance, the engine's mean TTFT), from counters that both
endpoints expose. An engine that cannot be read, or that the
sidecar reports down, is `up: false` with no figures, never zeros.

A name with several addresses (a Kubernetes headless Service: one per vLLM pod) is read address by
address and the payloads added up, as one engine of several replicas; through a load-balancing
name each reading would come from whichever pod answered, and its counters would jump between them.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.parser import text_string_to_metric_families

from loadwatch import loopback
from loadwatch.catalogue import Engine
from loadwatch.exporter.normalize import normalize
from loadwatch.loadgen.ticker import every

log = logging.getLogger(__name__)
INTERVAL = 2.0  # seconds between readings
TIMEOUT = 2.0
COUNTERS = {  # name in a reading -> the counter it comes from
    "prefix_hits": Engine.PREFIX_CACHE_HITS, "prefix_queries": Engine.PREFIX_CACHE_QUERIES,
    "spec_accepted": Engine.SPEC_ACCEPTED_TOKENS, "spec_drafted": Engine.SPEC_DRAFT_TOKENS,
    "ttft_sum": Engine.TTFT + "_sum", "ttft_count": Engine.TTFT + "_count",
    "rejections": Engine.ADMISSION_REJECTIONS,  # vLLM 0.32 and later, with admission control on
}


def _families(text: str) -> list:
    """The payload's families in the sidecar's schema: vLLM's own /metrics after the sidecar's
    normalisation (so both read alike)."""
    families = list(text_string_to_metric_families(text))
    if not any(f.name.startswith("loadwatch_engine_") for f in families):
        families = list(normalize(text, "engine").families.values())
    return families


def _samples(texts: tuple[str, ...]) -> dict[str, list[tuple[dict, float]]]:
    """Sample name -> its (labels, value), over the payloads of every address."""
    out: dict[str, list[tuple[dict, float]]] = {}
    for family in (f for text in texts for f in _families(text)):
        for sample in family.samples:
            # A counter's samples end in _total however the parser types its family.
            out.setdefault(sample.name.removesuffix("_total"), []).append((sample.labels, sample.value))
    return out


def _sum(samples: dict, name: str) -> float | None:
    values = [v for _, v in samples.get(name, [])]
    return sum(values) if values else None


def _sum_where(samples: dict, name: str, label: str, keep: Callable[[str], bool]) -> float | None:
    values = [v for labels, v in samples.get(name, []) if keep(labels.get(label, ""))]
    return sum(values) if values else None


def _max(samples: dict, name: str) -> float | None:
    values = [v for _, v in samples.get(name, [])]
    return max(values) if values else None


def _ranks(samples: dict) -> dict[str, dict] | None:
    """Each data-parallel rank's running, waiting and KV cache usage (vLLM's `engine` label), for a
    server that runs more than one; None for one rank. Its totals would hide a rank that queues while
    another has room."""
    ranks = sorted({labels.get("engine", "") for labels, _ in samples.get(Engine.REQUESTS_RUNNING, [])})
    if len(ranks) < 2:
        return None
    return {rank: {"running": _sum_where(samples, Engine.REQUESTS_RUNNING, "engine", rank.__eq__),
                   "waiting": _sum_where(samples, Engine.REQUESTS_WAITING, "engine", rank.__eq__),
                   "kv": max((v for labels, v in samples.get(Engine.KV_CACHE_USAGE, [])
                              if labels.get("engine", "") == rank), default=None)} for rank in ranks}


def parse(*texts: str) -> dict:
    """The /metrics payloads of one reading (one an address) -> its raw figures (counters as totals,
    added up over the addresses). ValueError for a payload that is neither the sidecar's nor vLLM's."""
    samples = _samples(texts)
    ups = [v for _, v in samples.get(Engine.UP, [])]
    return {
        "at": time.monotonic(),  # for rates between readings
        "up": (max(ups) >= 1) if ups else True,  # vLLM's own endpoint answered: it is up
        "kv": _max(samples, Engine.KV_CACHE_USAGE),
        "kv_peak": _max(samples, Engine.KV_CACHE_USAGE_MAX),
        "running": _sum(samples, Engine.REQUESTS_RUNNING),
        "waiting": _sum(samples, Engine.REQUESTS_WAITING),
        # Of one address only: the pods behind a name each have a rank 0, and adding them up would not do.
        "ranks": _ranks(samples) if len(texts) == 1 else None,
        # vLLM 0.32 and later: absent before, never 0 in their place.
        **{f"waiting_{reason}": _sum_where(samples, Engine.REQUESTS_WAITING_BY_REASON, "reason", reason.__eq__)
           for reason in ("capacity", "deferred")},
        "prompt_all": _sum(samples, Engine.PROMPT_TOKENS_BY_SOURCE),
        "prompt_cached": _sum_where(samples, Engine.PROMPT_TOKENS_BY_SOURCE, "source", "local_compute".__ne__),
        **{name: _sum(samples, source) for name, source in COUNTERS.items()},
    }


def _ratio(now: dict, before: dict | None, numerator: str, denominator: str, scale: float = 1.0) -> float | None:
    if before is None or now[denominator] is None or before[denominator] is None or now[numerator] is None \
            or before[numerator] is None:
        return None
    asked = now[denominator] - before[denominator]
    if asked <= 0:
        return None  # nothing happened in between, or the engine restarted
    return scale * (now[numerator] - before[numerator]) / asked


def _per_second(now: dict, before: dict | None, name: str) -> float | None:
    if before is None or now[name] is None or before[name] is None:
        return None
    seconds, change = now["at"] - before["at"], now[name] - before[name]
    return change / seconds if seconds > 0 and change >= 0 else None  # a fall: the engine restarted


def reading(now: dict | None, before: dict | None, error: str | None = None) -> dict:
    """What the charts show for one reading: gauges, and ratios since the previous reading."""
    if now is None or not now["up"]:
        return {"up": False, "error": error or "the sidecar reports the engine down"}
    return {"up": True, "kv": now["kv"], "kv_peak": now["kv_peak"], "running": now["running"],
            "waiting": now["waiting"], "waiting_capacity": now["waiting_capacity"],
            "waiting_deferred": now["waiting_deferred"], "ranks": now["ranks"],
            "prefix_hit_ratio": _ratio(now, before, "prefix_hits", "prefix_queries"),
            "prompt_cached_share": _ratio(now, before, "prompt_cached", "prompt_all"),
            "spec_acceptance": _ratio(now, before, "spec_accepted", "spec_drafted"),
            "ttft_ms": _ratio(now, before, "ttft_sum", "ttft_count", 1000.0),
            "rejections_per_s": _per_second(now, before, "rejections")}


class EngineWatch:
    """Reads the URL every INTERVAL seconds in a greenlet of its own; `latest` is the last reading."""

    def __init__(self, url: str, fetch: Callable[[str], str] | None = None,
                 addresses: Callable[[str], list[str]] | None = None) -> None:
        self.url = url
        self.fetch = fetch or _fetch
        self.addresses = addresses or _addresses
        self.latest: dict | None = None  # None: not read yet
        self._before: dict | None = None

    def read_once(self) -> dict:
        try:
            now = parse(*(self.fetch(url) for url in self.addresses(self.url)))
        except (OSError, ValueError) as exc:
            self._before = None
            self.latest = reading(None, None, f"cannot read {self.url}: {exc}")
            return self.latest
        self.latest = reading(now, self._before)
        self._before = now if now["up"] else None
        return self.latest

    def start(self) -> None:
        every(INTERVAL, self.read_once)
        log.info("Engine state for the web UI read from %s every %g s", self.url, INTERVAL)


def _addresses(url: str) -> list[str]:
    """The URL once per address its host name has, or the URL itself for one address (or an IP)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = sorted({str(info[4][0]) for info in socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)})
    except OSError:
        return [url]  # the fetch says why, in the words the chart shows
    if len(found) <= 1:
        return [url]
    userinfo = parts.netloc.rpartition("@")[0]
    return [urlunsplit(parts._replace(netloc=(f"{userinfo}@" if userinfo else "")
                                      + (f"[{a}]" if ":" in a else a) + f":{port}")) for a in found]


def _fetch(url: str) -> str:
    with loopback.urlopen(url, timeout=TIMEOUT) as response:
        return response.read().decode()
