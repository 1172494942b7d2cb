"""A history of runs, to see when a regression came: one SQLite file (the standard library's sqlite3)
that a team keeps as a CI artifact or on a shared disk.

Each run is stored with what makes it comparable (its `key`: the workload, the load, the model served,
loadwatch's version) and, per metric, its value and its own interval (a bootstrap over blocks of its
requests, where it kept its records). A run is judged against the comparable runs before it: their
values are the observations of run-to-run noise, and the newest is different beyond doubt where the
whole interval of its change lies outside what that noise predicts for one more run (a prediction
interval on the logs: `exp(y - m ± t·s·sqrt(1 + 1/n)) - 1`). It needs three earlier runs at least.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from loadwatch.metrics import bootstrap
from loadwatch.metrics.results import latency_key
from loadwatch.report.comparable import comparable_key
from loadwatch.report.compare import Run, load_run
from loadwatch.report.gate import THROUGHPUTS

SCHEMA = 1  # of the file; a file of a newer one is refused, never rewritten
# What a history keeps of each run: the figures a gate can name.
LATENCIES = [(metric, stat) for metric in ("ttft", "tpot", "itl", "e2el") for stat in ("median", "p90", "p99")]
METRICS = [*THROUGHPUTS, *(latency_key(m, s) for m, s in LATENCIES)]
MIN_BEFORE = 3  # earlier comparable runs needed to know the noise: the spread of two is too rough a guess
CONFIDENCE = 0.95


class HistoryError(Exception):
    """A history that cannot be read or written as asked; the message says why."""


def key_id(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def _own_interval(run: Run, key: str, rng: np.random.Generator) -> tuple[float | None, float | None]:
    """A latency's interval from the run's own records; none for a throughput (one value a run)."""
    if key in THROUGHPUTS or run.latencies is None:
        return None, None
    stat, metric, _ms = key.split("_")
    values = run.latencies.get(metric)
    if values is None or len(values) < 2:
        return None, None
    resamples = bootstrap.request_resamples(values, stat, rng)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(resamples, [tail, 100 - tail])
    return float(low), float(high)


@dataclass
class Entry:
    id: int
    run_id: str
    started_at: float
    label: str
    key: str
    figures: dict[str, tuple[float | None, float | None, float | None]]  # metric -> value, low, high


class History:
    def __init__(self, path: Path, create: bool = False) -> None:
        if not path.exists() and not create:
            raise HistoryError(f"no history at {path}: `loadwatch history add RUN --history {path}` starts one")
        self.path = path
        try:
            self.db = sqlite3.connect(path)
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            found = self.db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
            if found is None:
                self._create()
            elif int(found[0]) > SCHEMA:
                raise HistoryError(f"{path} was written by a newer loadwatch (history schema {found[0]}, this one "
                                   f"reads {SCHEMA}): upgrade loadwatch to read it; it is left as it is")
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{path} is not a loadwatch history ({exc}); it is left as it is") from None

    def _create(self) -> None:
        with self.db:
            self.db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
            self.db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, run_id TEXT UNIQUE, started_at REAL, "
                            "added_at REAL, label TEXT, key TEXT, key_json TEXT, results TEXT)")
            self.db.execute("CREATE TABLE figures (run INTEGER REFERENCES runs(id), metric TEXT, value REAL, "
                            "low REAL, high REAL, PRIMARY KEY (run, metric))")

    def close(self) -> None:
        self.db.close()

    def add(self, results_path: Path, label: str | None = None) -> tuple[Entry, bool]:
        """The run's entry; False where it was in the history already (added once, never rewritten)."""
        run = load_run(results_path)
        results = run.results
        key = comparable_key(results)
        found = self.db.execute("SELECT id FROM runs WHERE run_id = ?", (results.run_id,)).fetchone()
        if found is not None:
            return self.entry(found[0]), False
        rng = np.random.default_rng(0)
        figures = {m: (results.field(m), *_own_interval(run, m, rng)) for m in METRICS}
        with self.db:
            cursor = self.db.execute(
                "INSERT INTO runs (run_id, started_at, added_at, label, key, key_json, results) VALUES (?,?,?,?,?,?,?)",
                (results.run_id, results.started_at, time.time(), label or results.run_id, key_id(key),
                 json.dumps(key, sort_keys=True), results.model_dump_json()))
            self.db.executemany("INSERT INTO figures VALUES (?,?,?,?,?)",
                                [(cursor.lastrowid, m, *f) for m, f in figures.items()])
        assert cursor.lastrowid is not None
        return self.entry(cursor.lastrowid), True

    def entry(self, row_id: int) -> Entry:
        return next(e for e in self.entries() if e.id == row_id)

    def entries(self, key: str | None = None) -> list[Entry]:
        """The runs in the order they ran, of one comparable key or all."""
        rows = self.db.execute("SELECT id, run_id, started_at, label, key FROM runs ORDER BY started_at, id").fetchall()
        figures: dict[int, dict] = {}
        for run, metric, value, low, high in self.db.execute("SELECT run, metric, value, low, high FROM figures"):
            figures.setdefault(run, {})[metric] = (value, low, high)
        return [Entry(r[0], r[1], r[2], r[3], r[4], figures.get(r[0], {})) for r in rows if key in (None, r[4])]

    def key_of(self, entry: Entry) -> dict:
        return json.loads(self.db.execute("SELECT key_json FROM runs WHERE id = ?", (entry.id,)).fetchone()[0])


def noise_band(values: list[float | None]) -> tuple[float, float, float] | None:
    """The centre and the band one more run of the same configuration falls in (95 %), from runs'
    values: the geometric mean and the prediction interval of the logs. None below MIN_BEFORE."""
    clean = [float(v) for v in values if v is not None and v > 0]
    if len(clean) < MIN_BEFORE:
        return None
    logs = np.log(clean)
    m, s, n = float(logs.mean()), float(logs.std(ddof=1)), len(logs)
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * s * math.sqrt(1 + 1 / n)
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def shift(before: list[Entry], run: Entry, metric: str) -> bootstrap.Change | None:
    """`run`'s metric against the runs before it, the interval that of one more run of theirs; None
    where it cannot be judged."""
    value = run.figures.get(metric, (None, None, None))[0]
    band = noise_band([e.figures.get(metric, (None,))[0] for e in before])
    if band is None or value is None or value <= 0:
        return None
    centre, low, high = band
    change, ci_low, ci_high = (100 * (value / bound - 1) for bound in (centre, high, low))
    return bootstrap.Change(change, ci_low, ci_high, bootstrap.verdict(ci_low, ci_high, metric in THROUGHPUTS))
