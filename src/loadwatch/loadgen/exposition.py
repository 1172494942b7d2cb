"""Prometheus exposition of the client metrics: fresh families from the run state on each scrape,
served on the metrics port and the web UI."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator

from gevent.pywsgi import WSGIServer
from prometheus_client import make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    Exemplar,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

from loadwatch.catalogue import RUN_INFO, SLO_OBJECTIVE, Client
from loadwatch.loadgen.state import RunState
from loadwatch.loadgen.webui import tab as webui
from loadwatch.metrics import definitions as d
from loadwatch.metrics.counts import HistogramCounts
from loadwatch.metrics.slo import SLO
from loadwatch.settings import LoadSettings

log = logging.getLogger(__name__)


class ClientCollector(Collector):
    def __init__(self, state: RunState, user_count: Callable[[], int],
                 slos: Callable[[], list[SLO]] = list) -> None:
        self.state = state
        self.user_count = user_count
        self.slos = slos

    def collect(self) -> Iterator:
        counts = self.state.recorder.counts
        for hist_def in d.HISTOGRAMS.values():
            family = HistogramMetricFamily(hist_def.name, hist_def.help, labels=hist_def.labels)
            for labels, hist in counts.histograms_named(hist_def.name):
                family.add_metric(list(labels), _with_exemplars(hist), hist.total)
            if family.samples:
                yield family
        for name, help_text in d.COUNTER_HELP.items():
            label_names = d.COUNTER_LABELS.get(name, d.LABELS)
            counter = CounterMetricFamily(name, help_text, labels=label_names)
            for labels, value in counts.counters_named(name):
                counter.add_metric(list(labels), value)
            if counter.samples:
                yield counter
        yield GaugeMetricFamily(Client.USERS, "Locust users running now.", value=self.user_count())
        in_flight = GaugeMetricFamily(Client.IN_FLIGHT, "Requests sent and not yet finished.", labels=d.LABELS)
        for labels, n in sorted(self.state.in_flight().items()):
            in_flight.add_metric(list(labels), n)
        yield in_flight
        info = GaugeMetricFamily(
            RUN_INFO, "The load test run; stage follows the run.", labels=("run_id", "scenario", "target", "stage")
        )
        for scenario in self.state.scenarios:
            info.add_metric([self.state.run_id, scenario, self.state.target, self.state.stage], 1)
        yield info
        objectives = GaugeMetricFamily(SLO_OBJECTIVE, "The run's service-level objectives (--slo), each holding "
                                                      "its limit in the SLO's own unit (ms, or a ratio).",
                                       labels=("slo",))
        for slo in self.slos():
            objectives.add_metric([slo.name], slo.limit)
        if objectives.samples:  # absent without --slo: no objective is not an objective of 0
            yield objectives


def _with_exemplars(hist: HistogramCounts) -> list:
    """The cumulative buckets, each with its exemplar where it has one: OpenMetrics scrapes carry
    them (Prometheus keeps them with --enable-feature=exemplar-storage), the text format drops them."""
    buckets = hist.cumulative()
    if hist.exemplars is None:
        return buckets
    return [(bound, n, Exemplar({d.EXEMPLAR_LABEL: e.request_id}, e.value, e.at)) if e else (bound, n)
            for (bound, n), e in zip(buckets, hist.exemplars, strict=True)]


def client_registry(state: RunState, user_count: Callable[[], int],
                    slos: Callable[[], list[SLO]] = list) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClientCollector(state, user_count, slos))
    return registry


def serve(environment, state: RunState, host: str, port: int, settings: Callable[[], LoadSettings]) -> None:
    """The client metrics on --metrics-host:--metrics-port (0: off) and, when the web UI runs, on its
    /metrics (behind its login when --web-login is on), with the LLM tab's charts and downloads."""
    user_count = lambda: environment.runner.user_count if environment.runner else 0  # noqa: E731
    registry = client_registry(state, user_count, lambda: settings().slo)
    if environment.web_ui:
        webui.install(environment, state, registry, settings, user_count)
    if port == 0:
        return
    server = WSGIServer((host, port), make_wsgi_app(registry), log=None)
    try:
        server.start()
    except OSError as exc:
        print(f"loadwatch: cannot serve metrics on {host}:{port}: {exc.strerror}; "
              "choose another --metrics-port (0 turns it off) or --metrics-host", file=sys.stderr, flush=True)
        sys.exit(2)  # a bad option, as the exit codes (docs/reference/exit-codes-and-ports.md) say
    log.info("Client metrics at http://%s:%d/metrics", host, port)
