"""Traces in the formats in use, replayed against a server of known context (issue 41).

The real traces of `../shared/real/` (others' data, read in place; skipped where that folder is
absent) and our own sample, which always runs: each is replayed through `--num-requests` across two
processes, and the requests the server received must be exactly what the results count, the
entries that cannot fit its context skipped, counted and named in one line. Most entries of the
real traces are longer than the embedded engine's 2k context: the fake server, a word a token,
stands for a 32k model.
"""

from __future__ import annotations

import json

import pytest

from loadwatch.workloads.trace_formats import read_trace
from tests.conftest import REPO, headless_run
from tests.sse_server import TEMPLATE_TOKENS

REAL = REPO.parent / "shared" / "real"
CONTEXT = 32768
SENT = 24  # entries a run sends: the first of each trace


def traces() -> list[str]:
    if not REAL.is_dir():
        return []
    return sorted(p.name for p in REAL.iterdir() if p.name.startswith(("mooncake-", "azure-", "weka-", "otel-")))


def too_long(path, sent: int) -> int:
    """Entries of the first `sent` over the context: their own length plus the chat template's, or
    their messages' words (a span's)."""
    count = 0
    for entry in read_trace(path).entries[:sent]:
        prompt = entry.input_length if entry.messages is None else \
            sum(len(m["content"].split()) for m in entry.messages)
        count += prompt + TEMPLATE_TOKENS + entry.output_length > CONTEXT
    return count


def replay(fake_server, tmp_path, path, *options: str):
    server = fake_server("--max-model-len", str(CONTEXT), "--ttft", "0.005", "--itl", "0.001", "--tokens", "2")
    entries = read_trace(path).entries
    sent = min(SENT, len(entries))
    span_s = (entries[sent - 1].timestamp - entries[0].timestamp) / 1000
    run = headless_run(server.url, tmp_path / "r.json", "-u", "8", "-r", "8", "--processes", "2", "--dataset", "trace",
                       "--dataset-path", str(path), "--num-requests", str(SENT),
                       "--speedup", f"{max(1.0, span_s / 2):g}", *options, timeout=180)
    return server, run, sent


@pytest.mark.parametrize("name", traces() or [pytest.param("-", marks=pytest.mark.skip(
    reason=f"{REAL} is absent: others' traces are read in place, never copied here"))])
def test_a_real_trace_replays_each_entry_that_fits_once_and_names_those_that_do_not(fake_server, tmp_path, name):
    server, run, sent = replay(fake_server, tmp_path, REAL / name)
    output = run.stdout + run.stderr
    assert run.returncode == 0 and "Traceback" not in output, output[-3000:]
    results = json.loads((tmp_path / "r.json").read_text())
    skipped = too_long(REAL / name, sent)
    arrivals = server.stats()["arrivals"]
    print(f"{name}: {sent} entries, {skipped} too long, the server saw {arrivals}")
    assert arrivals == results["completed"] + results["failed"] == sent - skipped
    assert results["trace_entries_skipped"] == skipped
    if skipped:
        assert f"{skipped} of the {sent} entries of {REAL / name} this run sends cannot fit" in output


def test_our_trace_with_an_entry_too_long_skips_it_or_is_refused_in_one_line(fake_server, tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2024-05-10 00:00:0{i}.5+00:00,{40000 if i == 2 else 100 + i},{5}\n" for i in range(6)))
    server, run, sent = replay(fake_server, tmp_path, path)
    results = json.loads((tmp_path / "r.json").read_text())
    assert run.returncode == 0 and results["completed"] == server.stats()["arrivals"] == 5, run.stderr[-2000:]
    assert results["trace_entries_skipped"] == 1 and "azure.csv this run sends cannot fit" in run.stderr
    assert "row 4 (40003 + 5 tokens)" in run.stderr
    server, refused, _ = replay(fake_server, tmp_path, path, "--trace-too-long", "refuse", "--stop-timeout", "60")
    assert refused.returncode == 2 and server.stats()["arrivals"] == 0, refused.stderr[-2000:]
    assert "row 4 (40003 + 5 tokens); --trace-too-long skip sends the others" in refused.stderr
    assert "Traceback" not in refused.stderr
