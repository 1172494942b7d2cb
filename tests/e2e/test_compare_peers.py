"""A `vllm bench serve` result beside a loadwatch run of the same server, in `loadwatch compare`
(issue 41). The server is the fake one, of known timing (50 ms to the first token, then 10 ms a
token): both tools must find it, and compare must say how each defines what it measured. vllm bench
serve comes from the embedded engine's venv, which this tier has."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import headless_run
from tests.peers import vllm_bench_serve

REQUESTS, TOKENS = 60, 8


def test_vllm_bench_serve_and_loadwatch_side_by_side(fake_server, tmp_path):
    server = fake_server("--ttft", "0.05", "--itl", "0.01", "--tokens", str(TOKENS))
    vllm = vllm_bench_serve(server.url, tmp_path / "vllm.json", "--dataset-name", "random", "--random-input-len", "16",
                            "--random-output-len", str(TOKENS), "--num-prompts", str(REQUESTS), "--max-concurrency",
                            "4", "--request-rate", "inf", "--save-detailed")
    if vllm is None:
        pytest.fail("no embedded engine venv: `loadwatch engine setup` (the e2e tier's fixture) makes it")
    assert vllm.returncode == 0, vllm.stdout[-2000:] + vllm.stderr[-2000:]
    ours = headless_run(server.url, tmp_path / "lw" / "results.json", "-u", "4", "-r", "4", "--num-requests",
                        str(REQUESTS), "--dataset", "random", "--input-len", "16", "--max-tokens", str(TOKENS))
    assert ours.returncode == 0, ours.stderr[-2000:]
    compared = subprocess.run([sys.executable, "-m", "loadwatch.cli", "compare", f"loadwatch={tmp_path / 'lw'}",
                               f"vllm={tmp_path / 'vllm.json'}", "--json", str(tmp_path / "rows.json"), "--no-gate"],
                              capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    text = compared.stdout
    print(text)
    assert "| loadwatch |" in text and "| vllm |" in text and "## vllm against loadwatch" in text
    assert "**vllm bench serve**: TTFT ends at the first chunk that has `choices`" in text
    assert "**loadwatch**: TTFT ends at the first chunk with generated text" in text
    vllm_result = json.loads((tmp_path / "vllm.json").read_text())
    lw_result = json.loads((tmp_path / "lw" / "results.json").read_text())
    assert vllm_result["completed"] == REQUESTS == lw_result["completed"]
    rows = {r["metric"]: r for r in json.loads((tmp_path / "rows.json").read_text())["rows"]}
    # Both find the server's own 50 ms to the first token; with vllm's per-request lists (--save-detailed)
    # the change gets an interval.
    assert abs(rows["median_ttft_ms"]["change_pct"]) < 20 and rows["median_ttft_ms"]["method"] == "requests"
