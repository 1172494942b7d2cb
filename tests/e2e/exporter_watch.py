"""Run the sidecar beside a test and remember the peaks of what it exposed."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import defaultdict

from tests.conftest import free_port, scrape, total, wait_for


class ExporterWatch:
    def __init__(self, engine_url: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "loadwatch.cli", "exporter", "--target", f"engine={engine_url}",
             "--port", str(self.port), "--host", "127.0.0.1", "--interval", "0.5"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.peaks: dict[str, float] = defaultdict(float)
        self._stop = threading.Event()
        wait_for(lambda: total(scrape(self.url), "loadwatch_engine_up") == 1, 30, "the exporter to see the engine")
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def now(self, name: str, **labels: str) -> float:
        return total(scrape(self.url), name, **labels)

    def _poll(self) -> None:
        names = ("loadwatch_engine_requests_running", "loadwatch_engine_kv_cache_usage_ratio_max",
                 "loadwatch_engine_prefix_cache_hit_ratio", "loadwatch_engine_spec_decode_acceptance_ratio",
                 "loadwatch_engine_spec_decode_mean_acceptance_length")
        while not self._stop.wait(0.5):
            try:
                samples = scrape(self.url)
            except OSError:
                continue
            for name in names:
                self.peaks[name] = max(self.peaks[name], total(samples, name))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.process.terminate()
        self.process.wait(10)
