"""Embeddings fidelity, loadwatch beside `vllm bench serve`, against the fake server of tests/ whose
answer latency is known (it records when it really answered each request).

Both tools run a closed loop of each level's concurrent requests to /v1/embeddings, one text a
request, on a fresh server for --seconds; it prints the median and p99 of each tool's E2E minus the
server's true latency, and the requests/s. The server answers --latency after a request's first
byte arrived, so the true latency is what a perfect client would measure less the network's own
time on loopback.

    .venv/bin/python benchmarks/pooling.py [--seconds 15] [--levels 16,128] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from fidelity import REPO, on_fresh_server

from loadwatch.engine.settings import EngineSettings
from tests.peers import VLLM_ENV, VLLM_SHIM


def run_loadwatch(url: str, streams: int, seconds: int, out: Path) -> dict:
    results = out / f"loadwatch-{streams}.json"
    subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H", url, "--headless",
         "-u", str(streams), "-r", str(streams), "-t", f"{seconds}s", "--metrics-port", "0", "--stop-timeout", "10",
         "--endpoint", "embeddings", "--results-json", str(results), "--only-summary"],
        capture_output=True, text=True, timeout=seconds + 120)
    data = json.loads(results.read_text())
    return {"median": data["median_e2el_ms"], "p99": data["p99_e2el_ms"], "req/s": data["request_throughput"]}


def run_vllm(url: str, streams: int, seconds: int, latency: float, out: Path) -> dict | None:
    engine = EngineSettings()
    if not engine.python.exists():
        return None
    subprocess.run(
        [str(engine.python), "-c", VLLM_SHIM, "bench", "serve", "--backend", "openai-embeddings", "--base-url", url,
         "--endpoint", "/v1/embeddings", "--model", "fake-model", "--tokenizer", str(engine.model_dir),
         "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "1",
         "--num-prompts", str(int(streams * seconds / latency)), "--max-concurrency", str(streams),
         "--request-rate", "inf", "--save-result", "--result-dir", str(out), "--result-filename",
         f"vllm-{streams}.json", "--disable-tqdm"],
        capture_output=True, text=True, timeout=seconds * 6 + 300, env=VLLM_ENV)
    path = out / f"vllm-{streams}.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return {"median": data["median_e2el_ms"], "p99": data["p99_e2el_ms"], "req/s": data["request_throughput"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--levels", default="16,128", help="concurrent requests, comma-separated")
    parser.add_argument("--latency", type=float, default=0.05, help="the server's answer latency, seconds")
    args = parser.parse_args()
    print(f"fake server: embeddings answered {args.latency * 1000:.0f} ms after the request; {args.seconds} s a run")
    print(f"{'streams':>7} {'tool':<16} {'E2E p50 err':>11} {'p99 err':>8} {'req/s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for streams in (int(x) for x in args.levels.split(",")):
            for name, run in (("loadwatch", lambda u, s=streams: run_loadwatch(u, s, args.seconds, out)),
                              ("vllm bench serve", lambda u, s=streams: run_vllm(u, s, args.seconds,
                                                                                args.latency, out))):
                # The fake server answers embeddings --ttft after the request: that is the latency.
                measured, true = on_fresh_server(run, "--ttft", str(args.latency))
                if measured is None:
                    print(f"{streams:>7} {name:<16} (not run: no embedded engine venv)")
                    continue
                print(f"{streams:>7} {name:<16} {measured['median'] - true['median_e2e_ms']:>+8.1f} ms "
                      f"{measured['p99'] - true['p99_e2e_ms']:>+5.1f} ms {measured['req/s']:>7.0f}", flush=True)


if __name__ == "__main__":
    main()
