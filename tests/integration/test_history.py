"""A history of runs (SQLite): each run added once with what makes it comparable, the page marks where
a change beyond doubt began, and `--gate` judges the newest run against the comparable runs before it."""

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np

from loadwatch.cli import main
from loadwatch.report.history import History
from tests.pages import CHROMIUM, open_offline
from tests.unit.report.test_compare import results


def write_run(folder: Path, index: int, ttft_ms: np.ndarray, dataset: str = "random") -> Path:
    """A run folder as `loadwatch run` leaves it, the index-th of a series an hour apart."""
    folder.mkdir(parents=True)
    started = 1_800_000_000.0 + 3600 * index
    lines = [json.dumps({"id": str(i), "start": started + i * 0.2, "worker": "local", "model": "tiny",
                         "scenario": "chat", "stage": "load", "failure": None, "elapsed_s": t / 1000 + 1.0,
                         "ttft_s": t / 1000, "headers_s": None, "tpot_s": 0.02, "prompt_tokens": 10,
                         "output_tokens": 50, "tokens_from": "usage"}) for i, t in enumerate(ttft_ms)]
    (folder / "results.requests.jsonl").write_text("\n".join(lines) + "\n")
    figures = results(1.0, float(np.mean(ttft_ms))) | {
        "p99_ttft_ms": float(np.percentile(ttft_ms, 99)), "median_ttft_ms": float(np.median(ttft_ms))}
    (folder / "results.json").write_text(json.dumps(figures | {
        "run_id": f"run-{index}", "started_at": started, "ended_at": started + 60, "users": 4,
        "loadwatch_version": "0.1.0", "records": "results.requests.jsonl",
        "scenarios": {"chat (tiny)": results(1.0, 100.0)},
        "options": {"dataset": dataset, "max_tokens": 32}}))
    return folder


def history_of(tmp_path: Path, ttfts: list[float], capsys) -> Path:
    rng = np.random.default_rng(7)
    db = tmp_path / "history.db"
    for i, centre in enumerate(ttfts):
        run = write_run(tmp_path / f"r{i}", i, rng.normal(centre, 3, 120))
        assert main(["history", "add", str(run), "--history", str(db), "--label", f"commit-{i}"]) == 0
    capsys.readouterr()
    return db


def test_six_runs_the_sixth_slower_marks_the_sixth_and_the_gate_fails_without_it_passes(tmp_path, capsys):
    db = history_of(tmp_path, [100, 101, 99, 100, 102, 140], capsys)
    assert main(["history", str(db), "--gate"]) == 3
    said = capsys.readouterr().out
    assert "FAIL: ttft_p99_ms of commit-5" in said and "against 5 comparable runs before it" in said
    page = (tmp_path / "history.html").read_text()
    assert "Changes beyond doubt: commit-5: p99_ttft_ms +" in page and "commit-0" in page
    assert "tpot_ms +0.0 %" not in page, "a change of 0.0 % is no change, however sure"
    if CHROMIUM:  # as a person opens it: offline, every trend drawn
        drawn = open_offline(tmp_path / "history.html", tmp_path / "history.png")
        assert not drawn["errors"], drawn["errors"]
        assert any(title.endswith(": p99_ttft_ms") for title in drawn["titles"]), drawn["titles"]
    steady = history_of(tmp_path / "five", [100, 101, 99, 100, 102], capsys)
    assert main(["history", str(steady), "--gate"]) == 0
    assert "gate: passed" in capsys.readouterr().out


def test_a_run_is_added_once_and_never_compared_with_an_incomparable_one(tmp_path, capsys):
    db = history_of(tmp_path, [100, 101, 99], capsys)
    assert main(["history", "add", str(tmp_path / "r0"), "--history", str(db)]) == 0
    assert "already in the history" in capsys.readouterr().out
    other = write_run(tmp_path / "sharegpt", 9, np.full(50, 300.0), dataset="sharegpt")
    assert main(["history", "add", str(other), "--history", str(db)]) == 0
    assert "with 0 comparable runs before it" in capsys.readouterr().out
    assert main(["history", str(db), "--gate"]) == 1
    said = capsys.readouterr().out
    assert "3 runs of other workloads, loads, models or versions are not compared" in said
    assert "the gate needs 3 comparable runs before it to know their run-to-run noise, and the history has 0" in said
    history = History(db)
    assert len(history.entries()) == 4 and len({e.key for e in history.entries()}) == 2
    history.close()


def test_bad_histories_are_refused_in_one_line_and_left_as_they_are(tmp_path, capsys):
    db = history_of(tmp_path, [100, 101], capsys)
    newer = tmp_path / "newer.db"
    shutil.copy(db, newer)
    with sqlite3.connect(newer) as connection:
        connection.execute("UPDATE meta SET value = '99' WHERE name = 'schema'")
    before = newer.read_bytes()
    assert main(["history", str(newer)]) == 2
    assert "written by a newer loadwatch" in capsys.readouterr().out and newer.read_bytes() == before
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"not a database at all" * 100)
    assert main(["history", "add", str(tmp_path / "r0"), "--history", str(corrupt)]) == 2
    assert "is not a loadwatch history" in capsys.readouterr().out
    assert corrupt.read_bytes() == b"not a database at all" * 100
    empty = tmp_path / "empty.db"
    History(empty, create=True).close()
    assert main(["history", str(empty)]) == 2 and "holds no run yet" in capsys.readouterr().out
    assert main(["history", str(tmp_path / "missing.db")]) == 2 and "no history at" in capsys.readouterr().out
    assert "Traceback" not in capsys.readouterr().out
