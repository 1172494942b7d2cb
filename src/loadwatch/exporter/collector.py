"""The sidecar's exposition: each scrape merges the latest reading of every target."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from loadwatch.catalogue import Engine, Router
from loadwatch.exporter.fetch import REASONS
from loadwatch.exporter.sampler import Reading, RouterSampler, TargetSampler


class EngineCollector(Collector):
    def __init__(self, samplers: list[TargetSampler], routers: list[RouterSampler] | None = None) -> None:
        self.samplers = samplers
        self.routers = routers or []

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(Engine.UP, "1 when the sidecar's last sample of the target succeeded and is "
                                          "recent.", labels=["target"])
        errors = CounterMetricFamily(Engine.SCRAPE_ERRORS, "Failed samples of the target by reason.",
                                     labels=["target", "reason"])
        duration = GaugeMetricFamily(Engine.SCRAPE_DURATION,
                                     "Seconds the sidecar's last sample of the target took.", labels=["target"])
        readings: list[Reading] = []
        for sampler in self.samplers:
            sampler.ensure_running()
            reading = sampler.current()
            for reason in REASONS:
                errors.add_metric([sampler.target.name, reason], sampler.errors[reason])
            up.add_metric([sampler.target.name], 1.0 if reading.up else 0.0)
            duration.add_metric([sampler.target.name], reading.duration)
            readings.append(reading)
        yield up
        yield duration
        yield errors
        yield from _merged(readings)
        if self.routers:
            yield from self.router_families()

    def router_families(self) -> Iterator[Metric]:
        """A fleet's routers: `up` for each, and a router that is down exposes nothing else."""
        up = GaugeMetricFamily(Router.UP, "1 when the sidecar's last sample of the router succeeded and is "
                                          "recent.", labels=["router"])
        readings: list[Reading] = []
        for sampler in self.routers:
            sampler.ensure_running()
            reading = sampler.current()
            up.add_metric([sampler.target.name], 1.0 if reading.up else 0.0)
            readings.append(reading)
        yield up
        yield from _merged(readings)


def _merged(readings: list[Reading]) -> Iterator[Metric]:
    """The families of every reading, one family per name (each sample labelled with its target or
    router already). A source that is down exposes nothing but its `up`: no stale series."""
    merged: dict[str, Metric] = {}
    for reading in readings:
        for family in reading.families if reading.up else ():
            into = merged.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            into.samples.extend(family.samples)
    yield from merged.values()
