"""Run the sidecar: a sampler per target and the HTTP endpoint Prometheus scrapes."""

from __future__ import annotations

import logging
import signal

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from loadwatch.exporter.collector import EngineCollector
from loadwatch.exporter.sampler import RouterSampler, TargetSampler
from loadwatch.exporter.settings import ExporterSettings
from loadwatch.interrupts import raise_if_interrupted

log = logging.getLogger(__name__)


def samplers_for(settings: ExporterSettings) -> list[TargetSampler]:
    return [TargetSampler(t, settings.interval, settings.window, settings.timeout) for t in settings.targets]


def router_samplers_for(settings: ExporterSettings) -> list[RouterSampler]:
    replicas = {str(t.url): t.name for t in settings.targets}
    return [RouterSampler(r, replicas, settings.interval, settings.window, settings.timeout)
            for r in settings.routers]


# Both stop the sidecar. They are blocked before any thread starts, so every thread inherits the
# block and the kernel keeps a signal pending for the process until the main thread takes it with
# sigwait. A Python handler instead runs only in the main thread, between two bytecodes: one that
# arrived as the main thread went to sleep in its wait could go unrun, and the sidecar sampled on (seen
# once in a check, 1 stop in 60 here with both cores busy; a pod's stop then waits out its grace period).
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def serve(settings: ExporterSettings) -> None:
    samplers, routers = samplers_for(settings), router_samplers_for(settings)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(samplers, routers))
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        raise_if_interrupted()  # a signal that came while the command started, before the block
        try:
            server, _thread = start_http_server(settings.port, settings.host, registry=registry)
        except OSError as exc:
            raise OSError(f"cannot listen on port {settings.port}: {exc.strerror}; choose another with --port") \
                from None
        for sampler in [*samplers, *routers]:
            sampler.start()
        names = ", ".join(f"{t.name}={t.shown_url}" for t in [*settings.targets, *settings.routers])
        log.info("engine sidecar on http://%s:%d/metrics, sampling every %g s: %s",
                 settings.host, settings.port, settings.interval, names)
        received = signal.sigwait(STOP_SIGNALS)
        log.info("%s: stopping", signal.Signals(received).name)
        for sampler in [*samplers, *routers]:
            sampler.stop()
        server.shutdown()
    finally:
        # A second signal that came during the stop is raised here, as Ctrl-C: the process ends.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
