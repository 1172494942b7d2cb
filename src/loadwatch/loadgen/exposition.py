"""Prometheus exposition of the client metrics: fresh families from the run state on each scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

from loadwatch.loadgen.state import RunState
from loadwatch.metrics import definitions as d


class ClientCollector(Collector):
    def __init__(self, state: RunState, user_count: Callable[[], int]) -> None:
        self.state = state
        self.user_count = user_count

    def collect(self) -> Iterator:
        counts = self.state.recorder.counts
        for hist_def in d.HISTOGRAMS.values():
            family = HistogramMetricFamily(hist_def.name, hist_def.help, labels=d.LABELS)
            for labels, hist in counts.histograms_named(hist_def.name):
                family.add_metric(list(labels), hist.cumulative(), hist.total)
            if family.samples:
                yield family
        for name, help_text in d.COUNTER_HELP.items():
            label_names = d.FAILURE_LABELS if name == d.FAILURES else d.LABELS
            counter = CounterMetricFamily(name, help_text, labels=label_names)
            for labels, value in counts.counters_named(name):
                counter.add_metric(list(labels), value)
            if counter.samples:
                yield counter
        yield GaugeMetricFamily(d.USERS, "Locust users running now.", value=self.user_count())
        in_flight = GaugeMetricFamily(d.IN_FLIGHT, "Requests sent and not yet finished.", labels=d.LABELS)
        for labels, n in sorted(self.state.in_flight().items()):
            in_flight.add_metric(list(labels), n)
        yield in_flight
        info = GaugeMetricFamily(
            d.RUN_INFO, "The load test run; stage follows the run.", labels=("run_id", "scenario", "target", "stage")
        )
        for scenario in self.state.scenarios:
            info.add_metric([self.state.run_id, scenario, self.state.target, self.state.stage], 1)
        yield info


def client_registry(state: RunState, user_count: Callable[[], int]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientCollector(state, user_count))
    return registry
