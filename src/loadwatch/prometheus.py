"""Reading from Prometheus: its HTTP query API. (Running a Prometheus is the stack's: stack/readback.py.)

The two GET endpoints are called with urllib: the client libraries for Prometheus's query API pull
pandas and more for what is two URLs and a JSON envelope here.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse

from loadwatch import loopback


class PrometheusError(Exception):
    """Prometheus could not be reached or refused a query; the message says which."""


class PrometheusAPI:
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str, params: dict) -> list:
        return self._data(path, params)["result"]

    def _data(self, path: str, params: dict):
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with loopback.urlopen(url, timeout=self.timeout) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
            raise PrometheusError(f"Prometheus refused {params.get('query')!r}: {detail}") from None
        except (OSError, ValueError) as exc:
            raise PrometheusError(f"cannot read from Prometheus at {self.url}: {exc}") from None
        return body["data"]

    def query(self, expr: str, at: float) -> list:
        return self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})

    def scalar(self, expr: str, at: float) -> float | None:
        """The value of a one-series query; None when it has no series (or is NaN)."""
        result = self.query(expr, at)
        if not result:
            return None
        value = float(result[0]["value"][1])
        return None if value != value else value

    def query_range(self, expr: str, start: float, end: float, step: float) -> list:
        return self._get("/api/v1/query_range",
                         {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})

    def exemplars(self, expr: str, start: float, end: float) -> list:
        """[{seriesLabels, exemplars: [{labels, value, timestamp}]}] of the series `expr` selects
        (Prometheus started with --enable-feature=exemplar-storage)."""
        return self._data("/api/v1/query_exemplars", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}"})
