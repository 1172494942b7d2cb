"""`loadwatch explain` offline, from a run folder's records (its Prometheus part is in the e2e tier)."""

import json

from loadwatch.cli import main
from tests.unit.metrics.test_ttft_split import queued
from tests.unit.report.test_report import RESULTS


def run_folder(tmp_path, records):
    (tmp_path / "results.json").write_text(json.dumps({**RESULTS, "records": "results.requests.jsonl"}))
    (tmp_path / "results.requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path


def test_the_slowest_request_is_told_with_its_timeline_and_the_part_that_made_it_slow(tmp_path, capsys):
    run = run_folder(tmp_path, [queued(i, 0.001) for i in range(19)] + [queued(19, 1.5)])
    assert main(["explain", str(run), "--slowest", "1"]) == 0
    out = capsys.readouterr().out
    assert "no prometheus-data in or above" in out  # the engine's state is left out, said once
    assert "request q19 " in out and "request q18" not in out
    assert "queued 1,500.0 ms" in out and "+1,524.0 ms  first token" in out
    assert "why: waiting in the engine's queue: 1,500.0 ms against the run's median of 1.0 ms" in out


def test_a_request_is_found_by_the_start_of_its_id_and_an_ambiguous_or_unknown_one_is_refused(tmp_path, capsys):
    run = run_folder(tmp_path, [queued(i, 0.001) for i in range(12)])
    assert main(["explain", str(run), "q11"]) == 0
    assert "request q11 " in capsys.readouterr().out
    assert main(["explain", str(run), "q1"]) == 1  # q1, q10, q11
    assert "3 requests of the run have an id starting 'q1'; give more of it" in capsys.readouterr().out
    assert main(["explain", str(run), "zz"]) == 1
    assert "no requests of the run have an id starting 'zz'" in capsys.readouterr().out


def test_a_run_without_records_says_what_explain_reads(tmp_path, capsys):
    (tmp_path / "results.json").write_text(json.dumps(RESULTS))
    assert main(["explain", str(tmp_path)]) == 1
    assert "explain reads the per-request records a run writes beside its results" in capsys.readouterr().out


def answered_whole(i: int, seconds: float) -> dict:
    """An embeddings request's record: one answer, no first token."""
    return {**queued(i, 0.001), "ttft_s": None, "tpot_s": None, "output_tokens": None, "elapsed_s": seconds,
            "headers_s": seconds, "engine_queue_s": None, "engine_prefill_s": None}


def test_requests_answered_whole_are_told_by_their_e2e(tmp_path, capsys):
    """Embeddings and rerank have no first token to split at: explain once failed them as 'no measured
    request', and an id of one raised a TypeError."""
    run = run_folder(tmp_path, [answered_whole(i, 0.010) for i in range(19)] + [answered_whole(19, 0.200)])
    assert main(["explain", str(run), "--slowest", "1"]) == 0
    out = capsys.readouterr().out
    assert "20 requests answered whole (embeddings or rerank)" in out and "their median 10.0 ms" in out
    assert "request q19 " in out and "+200.0 ms  answered whole" in out
    assert "why: the answer took 200.0 ms against the run's median of 10.0 ms." in out
    assert main(["explain", str(run), "q3"]) == 0
    assert "why: nothing stands out" in capsys.readouterr().out
