"""Per-request records: one JSON object per request, as the run writes them to its JSON Lines
file, and that file read back into exact figures.

JSON Lines rather than Parquet: a line is complete once written, so a run killed mid-way leaves a
readable file, and pandas (`read_json(path, lines=True)`) and duckdb (`read_json_auto`) read it as
it is. Times are seconds: `start` of the epoch, latencies `_s`.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from loadwatch.metrics.exact import Exact
from loadwatch.metrics.samples import Samples
from loadwatch.metrics.slo import FAILURE_RATIO, SLO, goodput_limits, within
from loadwatch.metrics.timing import RequestMetrics


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 6)


CANCELLED = "cancelled"  # a record's `failure` when the client hung up: not a success, though not the server's failure
# A record's `failure` when the server refused the request at admission (vLLM's --max-num-queued-reqs,
# --max-num-queued-tokens): its own outcome, not a failure; the record's `rejection` names the limit.
REJECTED = "rejected"


def as_record(request_id: str, started_at: float, worker: str, model: str, scenario: str, stage: str,
              elapsed: float, failure: str | None, m: RequestMetrics | None, tokens_from: str,
              with_itl: bool, turn: int | None = None, cancelled_ttft: float | None = None, images: int = 0,
              image_bytes: int = 0, replica: str | None = None, prefix: int | None = None,
              rejection: str | None = None) -> dict:
    ttft = m.ttft if m else cancelled_ttft
    record = {"id": request_id, "start": round(started_at, 6), "worker": worker, "model": model,
              "scenario": scenario, "stage": stage, "failure": failure,
              "elapsed_s": round(m.e2e if m else elapsed, 6),
              "ttft_s": round(ttft, 6) if ttft is not None else None,
              "headers_s": round(m.headers, 6) if m and m.headers is not None else None,
              "tpot_s": round(m.tpot, 6) if m and m.tpot is not None else None,
              "prompt_tokens": m.prompt_tokens if m else None,
              "output_tokens": m.completion_tokens if m else None,
              "tokens_from": tokens_from if m else None,
              "turn": turn,
              "ttfa_s": round(m.ttfa, 6) if m and m.ttfa is not None else None,
              "cached_tokens": m.cached_tokens if m else None,
              "reasoning_tokens": m.reasoning_tokens if m else None,
              "tool_calls": m.tool_calls if m else None}
    engine = m.engine if m else None
    if m is not None and engine is not None:  # vLLM's own account of it: docs/guides/slow-requests.md
        record.update(engine_queue_s=_rounded(engine.queue), engine_prefill_s=_rounded(engine.prefill),
                      engine_decode_s=_rounded(engine.decode), engine_mean_itl_s=_rounded(engine.mean_itl),
                      ttft_rest_s=_rounded(m.ttft_rest), spec_acceptance_length=engine.spec_acceptance_length,
                      spec_acceptance_rate=engine.spec_acceptance_rate)
    if rejection is not None:  # failure `rejected`: the admission limit the server named
        record["rejection"] = rejection
    if images:
        record.update(images=images, image_bytes=image_bytes)
    if replica is not None:  # a fleet's: the replica that served it, as its answer said
        record["replica"] = replica
    if prefix is not None:  # which shared prefix its prompt starts with: where a fleet routed each prefix
        record["prefix"] = prefix
    if with_itl:
        record["itl_s"] = [round(gap, 6) for gap in m.itl] if m else []
    return record


def ratio_counts(metric: str, records: list[dict]) -> tuple[int, int]:
    """(counted, ended) of failure_ratio or rejected_ratio over records: the failed or the rejected,
    and every request that ended (a hang-up is the client's: in neither)."""
    ended = [r["failure"] for r in records if r["failure"] != CANCELLED]
    counted = sum(f is not None and f != REJECTED for f in ended) if metric == FAILURE_RATIO \
        else sum(f == REJECTED for f in ended)
    return counted, len(ended)


def read_records(path: Path) -> Iterator[dict]:
    """The records of a file; a last line cut by a crash is skipped. ValueError for any other bad line."""
    with open(path) as lines:
        broken: str | None = None  # a line that did not parse: fine only as a cut last line
        for number, line in enumerate(lines, 1):
            if broken is not None:
                raise ValueError(f"{path}:{number - 1}: not a JSON record")
            try:
                record = json.loads(line)
            except ValueError:
                broken = line
                continue
            yield record
        if broken is not None and broken.endswith("\n"):
            raise ValueError(f"{path}: its last line is not a JSON record")


def exact_samples(path: Path, slos: list[SLO]) -> tuple[Samples, bool]:
    """Every measured (not warm-up) request of a records file, with exact distributions, and
    whether the file had the inter-token gaps."""
    samples = Samples(Exact)
    limits = goodput_limits(slos)
    has_itl = False
    for r in read_records(path):
        if r["stage"] == "warmup":
            continue
        series = samples.of((r["model"], r["scenario"], r["stage"]))
        if r["failure"] == CANCELLED:
            series.add_cancelled(r["start"], r["elapsed_s"], r["ttft_s"])
            continue
        if r["failure"] == REJECTED:
            series.add_rejected(r["start"], r["elapsed_s"], r["rejection"])
            continue
        if r["failure"] is not None:
            series.add_failure(r["start"], r["elapsed_s"], r["failure"])
            continue
        has_itl = has_itl or "itl_s" in r
        m = RequestMetrics(ttft=r["ttft_s"], e2e=r["elapsed_s"], itl=tuple(r.get("itl_s", ())), tpot=r["tpot_s"],
                           prompt_tokens=r["prompt_tokens"], completion_tokens=r["output_tokens"],
                           headers=r.get("headers_s"), ttfa=r.get("ttfa_s"), cached_tokens=r.get("cached_tokens"),
                           reasoning_tokens=r.get("reasoning_tokens"), tool_calls=r.get("tool_calls") or 0)
        series.add_success(r["start"], m, within(limits, {"ttft": m.ttft, "tpot": m.tpot, "e2el": m.e2e}),
                           r.get("images", 0), r.get("image_bytes", 0))
    return samples, has_itl


def request_latencies(path: Path) -> dict[str, np.ndarray]:
    """Each measured successful request's TTFT, TPOT and E2E latency in ms, from a records file, in
    the order the requests started (TPOT only where the request had two tokens or more, TTFT only
    where it streamed; NaN marks an absence while sorting). Columns of floats, not the records: a million cost 32 MB."""
    columns: dict[str, array] = {name: array("d") for name in ("start", "ttft", "e2el", "tpot")}
    for r in read_records(path):
        if r["stage"] == "warmup" or r["failure"] is not None:
            continue
        columns["start"].append(r["start"])
        columns["ttft"].append(math.nan if r["ttft_s"] is None else r["ttft_s"])  # None: embeddings, rerank
        columns["e2el"].append(r["elapsed_s"])
        columns["tpot"].append(math.nan if r["tpot_s"] is None else r["tpot_s"])
    order = np.argsort(np.frombuffer(columns["start"], dtype=np.float64), kind="stable")
    out = {name: np.frombuffer(columns[name], dtype=np.float64)[order] * 1000 for name in ("ttft", "e2el", "tpot")}
    for name in ("ttft", "tpot"):
        out[name] = out[name][~np.isnan(out[name])]
    return out
