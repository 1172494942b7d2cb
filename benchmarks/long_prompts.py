"""Measurement fidelity with long prompts: request bodies from a few bytes to megabytes, against the
fake server of tests/ whose timing is known (it times each first token from the request's first
byte, so an upload that outlasts a short TTFT still counts in the truth).

For each prompt size, loadwatch runs a closed loop of --streams for --seconds on a fresh server
with a JSON Lines dataset of one prompt that size (words of 6 bytes: ~4 characters a token, so
100,000 tokens are ~600 kB of text, and 1 MB bodies stand for the 160k-token prompts of the
longest contexts). It prints the median and p99 TTFT minus the server's true TTFT, and the
client's CPU over the run (its start included): a client that copies or re-encodes a large body
per read shows it here first. `vllm bench serve` does not run beside it: its prompts from a file
(the `custom` dataset) need pandas (vllm[bench]), which the embedded engine's venv does not carry.
Long single lines in the answer are the endless-line test's (tests/integration/test_http_stack.py)
and benchmarks/stream_readers.py's.

    .venv/bin/python benchmarks/long_prompts.py [--streams 8] [--seconds 15] [--sizes 100,200000,1000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fidelity import ITL, REPO, TOKENS, TTFT, get, start_server


def dataset(size: int, out: Path) -> Path:
    path = out / f"prompt-{size}.jsonl"
    words = "lorem " * max(1, size // 6)
    path.write_text(json.dumps({"prompt": words, "max_tokens": TOKENS}) + "\n")
    return path


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_loadwatch(url: str, prompts: Path, streams: int, seconds: int, out: Path) -> dict:
    results = out / "loadwatch.json"
    subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H", url, "--headless",
         "-u", str(streams), "-r", str(streams), "-t", f"{seconds + 2}s", "--metrics-port", "0",
         "--stop-timeout", "10", "--endpoint", "completions", "--dataset", "jsonl", "--dataset-path", str(prompts),
         "--warmup-seconds", "2", "--results-json", str(results), "--only-summary"],
        capture_output=True, text=True, timeout=seconds + 120)
    data = json.loads(results.read_text())
    return {"median": data["median_ttft_ms"], "p99": data["p99_ttft_ms"], "requests": data["completed"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--sizes", default="100,200000,1000000", help="prompt sizes in bytes, comma-separated")
    args = parser.parse_args()
    print(f"fake server: TTFT {TTFT * 1000:.0f} ms, {TOKENS} tokens {ITL * 1000:.0f} ms apart; {args.streams} streams, "
          f"{args.seconds} s per run")
    print(f"{'prompt bytes':>12} {'requests':>8} {'TTFT p50 err':>12} {'p99 err':>9} {'client CPU':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for size in (int(s) for s in args.sizes.split(",")):
            prompts = dataset(size, out)
            server, url = start_server()
            try:
                time.sleep(0.5)
                cpu = children_cpu()
                measured = run_loadwatch(url, prompts, args.streams, args.seconds, out)
                cpu = children_cpu() - cpu  # Locust's own: the server, a child too, counts once waited for
                true = get(url + "/stats")  # the server's own record of each first token
            finally:
                server.terminate()
                server.wait(10)
            print(f"{size:>12} {measured['requests']:>8} {measured['median'] - true['median_ttft_ms']:>+9.1f} ms "
                  f"{measured['p99'] - true['p99_ttft_ms']:>+6.1f} ms {cpu:>8.1f} s", flush=True)


if __name__ == "__main__":
    main()
