"""Run the sidecar: a sampler per target and the HTTP endpoint Prometheus scrapes."""

from __future__ import annotations

import logging
import signal
import threading

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from loadwatch.exporter.collector import EngineCollector
from loadwatch.exporter.sampler import TargetSampler
from loadwatch.exporter.settings import ExporterSettings

log = logging.getLogger(__name__)


def samplers_for(settings: ExporterSettings) -> list[TargetSampler]:
    return [TargetSampler(t, settings.interval, settings.window, settings.timeout) for t in settings.targets]


def _terminate(*_args: object) -> None:
    raise KeyboardInterrupt


def serve(settings: ExporterSettings) -> None:
    samplers = samplers_for(settings)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(samplers))
    try:
        server, _thread = start_http_server(settings.port, settings.host, registry=registry)
    except OSError as exc:
        raise OSError(f"cannot listen on port {settings.port}: {exc.strerror}; choose another with --port") from None
    for sampler in samplers:
        sampler.start()
    names = ", ".join(f"{t.name}={t.shown_url}" for t in settings.targets)
    log.info("engine sidecar on http://%s:%d/metrics, sampling every %g s: %s",
             settings.host, settings.port, settings.interval, names)
    # SIGTERM ends the wait as Ctrl-C does, by an exception in the main thread: a handler that sets an
    # Event takes the Event's own lock, which the interrupted wait may hold (a stuck stop, seen once in CI).
    signal.signal(signal.SIGTERM, _terminate)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    for sampler in samplers:
        sampler.stop()
    server.shutdown()
