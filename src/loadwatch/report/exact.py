"""A run's figures recomputed exactly from its per-request records, where they were kept: the
results file's percentiles come from sketches (within 0.5 %), the records have every value."""

from __future__ import annotations

from pathlib import Path

from loadwatch.metrics.records import exact_samples
from loadwatch.metrics.results import STATS, Results, latency_key
from loadwatch.metrics.summary import figures
from loadwatch.settings import records_beside


def records_of(results_path: Path, results: Results) -> Path:
    """The run's records file: where its results say, else (files written before they said) beside them."""
    if results.records is None:
        return records_beside(results_path)
    return results_path.parent / results.records  # an absolute path stays as it is


def with_exact_figures(results_path: Path, results: Results) -> tuple[Results, int | None]:
    """The results, with the run's own figures recomputed from the records beside them when there
    are; and how many records that was (None: no records file). ValueError for unreadable records."""
    path = records_of(results_path, results)
    if not path.is_file():
        return results, None
    slos = results.objectives()
    try:
        samples, has_itl = exact_samples(path, slos)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read the per-request records {path}: {exc}") from None
    total = samples.total()
    exact = figures(total)
    if not has_itl:  # the records have no gaps (--record-itl was off): the sketch's ITL stays
        for stat in STATS:
            exact.pop(latency_key("itl", stat), None)
    return (Results.model_validate({**results.model_dump(), **exact}),
            total.completed + total.failed + total.rejected + total.cancelled)
