"""`loadwatch explain` offline, from a run folder's records (its Prometheus part is in the e2e tier)."""

import json

from loadwatch.cli import main
from loadwatch.metrics.capacity import Capacity
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
    assert main(["explain", str(run), "q1"]) == 2  # q1, q10, q11: bad input
    assert "3 requests of the run have an id starting 'q1'; give more of it" in capsys.readouterr().out
    assert main(["explain", str(run), "zz"]) == 2
    assert "no requests of the run have an id starting 'zz'" in capsys.readouterr().out


def test_a_run_without_records_says_what_explain_reads(tmp_path, capsys):
    (tmp_path / "results.json").write_text(json.dumps(RESULTS))
    assert main(["explain", str(tmp_path)]) == 2
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


def test_the_story_is_the_commands_own_output_and_carries_no_prefix(tmp_path, capsys):
    run = run_folder(tmp_path, [queued(i, 0.001) for i in range(19)] + [queued(19, 1.5)])
    assert main(["explain", str(run), "--slowest", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("request q19 ") for line in lines)
    assert any(line.startswith("  why: ") for line in lines)
    prefixed = [line for line in lines if line.startswith("loadwatch: ")]
    assert prefixed == [line for line in lines if line.startswith("loadwatch: note: ")] and len(prefixed) == 1


def capacity_folder(tmp_path, decisive):
    folder = tmp_path / "capacity"
    (folder / "levels").mkdir(parents=True)
    for name, slow in (("level-01", 0.001), ("level-02", 1.5)):
        level = folder / "levels"
        (level / f"{name}.json").write_text(json.dumps({**RESULTS, "records": f"{name}.requests.jsonl"}))
        (level / f"{name}.requests.jsonl").write_text("".join(
            json.dumps(r) + "\n" for r in [queued(i, 0.001) for i in range(9)] + [queued(9, slow)]))
    (folder / "capacity.json").write_text(Capacity(mode="users", unit="users", max_sustainable=None,
                                                   decisive_level=decisive).json_text())
    return folder


def test_a_capacity_folder_is_explained_by_its_decisive_level(tmp_path, capsys):
    """The capacity report's advice, `loadwatch explain RUN`, once answered 'cannot read results.json'."""
    assert main(["explain", str(capacity_folder(tmp_path, "level-02")), "--slowest", "1"]) == 0
    out = capsys.readouterr().out
    assert "level-02.requests.jsonl" in out and "queued 1,500.0 ms" in out


def test_a_folder_of_several_runs_without_one_to_choose_lists_them_and_exits_2(tmp_path, capsys):
    folder = capacity_folder(tmp_path, None)
    assert main(["explain", str(folder)]) == 2
    out = capsys.readouterr().out
    assert "holds a capacity search's levels, not one run; name one:" in out
    assert f"loadwatch explain {folder / 'levels' / 'level-01.json'}" in out
    assert f"loadwatch explain {folder / 'levels' / 'level-02.json'}" in out
    experiment = tmp_path / "experiment"
    for cell in ("a/chat/r1", "b/chat/r1"):
        (experiment / cell).mkdir(parents=True)
        (experiment / cell / "results.json").write_text(json.dumps(RESULTS))
    (experiment / "summary.json").write_text("{}")
    assert main(["explain", str(experiment)]) == 2
    assert "holds an experiment's cells, not one run" in capsys.readouterr().out
