"""A Prometheus started on a finished run's data, to read it back (loadwatch report)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loadwatch import processes
from loadwatch.defaults import LOOPBACK
from loadwatch.processes import ComponentError, port_or_free
from loadwatch.prometheus import PrometheusAPI, PrometheusError

# The client's exemplars (request ids on the TTFT and E2E buckets) are kept in memory and in the
# WAL, which a readback replays: a run's own Prometheus still has them afterwards.
EXEMPLARS = "--enable-feature=exemplar-storage"


DATA = "prometheus-data"
UP = 3  # folders above a run's to look for its Prometheus data: an experiment keeps it per arm


def data_of(run: Path) -> Path | None:
    """The Prometheus data of a run folder (or of the folder of a results file): in it, or in the
    folder of the stack it ran on, up to UP levels above."""
    folder = run if run.is_dir() else run.parent
    for candidate in [folder, *folder.parents][:UP + 1]:
        if (candidate / DATA).is_dir():
            return candidate / DATA
    return None


@contextmanager
def prometheus_on(data_dir: Path, log_dir: Path, binary: str = "prometheus") -> Iterator[PrometheusAPI]:
    """A Prometheus that scrapes nothing, serving a finished run's TSDB, stopped on exit."""
    if not (data_dir / "wal").is_dir() and not any(data_dir.glob("01*")):
        raise PrometheusError(f"{data_dir} holds no Prometheus data")
    config = log_dir / "prometheus-readback.yml"
    log_dir.mkdir(parents=True, exist_ok=True)
    config.write_text("global: {}\n")
    port = port_or_free()
    url = f"http://{LOOPBACK}:{port}"
    try:
        component = processes.start(
            "prometheus-readback",
            [binary, f"--config.file={config}", f"--storage.tsdb.path={data_dir}",
             f"--web.listen-address={LOOPBACK}:{port}", "--storage.tsdb.retention.time=100y", EXEMPLARS],
            url, "/-/ready", log_dir / "prometheus-readback.log", timeout=120)
    except ComponentError as exc:
        raise PrometheusError(str(exc)) from None
    try:
        yield PrometheusAPI(url)
    finally:
        processes.stop_group(component.pid, 20.0)
