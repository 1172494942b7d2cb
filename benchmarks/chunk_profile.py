"""Where a streamed chunk's CPU goes in the load generator: loadwatch with --processes 1 on one core,
the fake server of tests/ on the other, sampled by py-spy (its --native stacks, so that time in C
extensions is seen where it is spent) while the streams run.

Each sample is put in the first part its stack reaches from the innermost frame outwards, and the
parts are printed as shares of the samples and as microseconds per streamed chunk (the client's
CPU over the run, as its processes count it, divided by the chunks it received):

- HTTP read: the socket's reads, the process's reader (client/reader.py) and geventhttpclient's
  parsing of the HTTP response;
- SSE framing: the stream's lines and events (client/reading.py, client/sse.py);
- JSON decoding: each chunk's JSON and what is read from it (client/chunks.py);
- timing and recording: a request's timing, results, records and metrics once it ends;
- gevent's loop: the hub's waits and switches between greenlets;
- Locust and the rest: the user's loop, spawning, reporting, and whatever else.

    .venv/bin/python benchmarks/chunk_profile.py [--streams 1024] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.fidelity import CLIENT_CORE, ITL, TOKENS, TTFT, pinned, start_server  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# (part, what a frame's function or file contains), tried in order on each frame from the innermost out.
PARTS = [
    ("SSE framing", ("client/reading.py", "client/sse.py")),
    ("JSON decoding", ("client/chunks.py", "orjson")),
    ("timing and recording", ("loadwatch/metrics/", "loadgen/recorder", "loadgen/results", "client/answer.py",
                              "loadgen/exposition", "prometheus_client")),
    ("HTTP read", ("geventhttpclient", "gevent/_socket", "gevent/_socketcommon", "sock_recv", "recv (",
                   "client/reader.py")),
    ("gevent's loop", ("gevent/hub", "gevent/_hub", "greenlet", "gevent/libev", "gevent/_gevent_c", "epoll",
                       "_abstract_linkable", "gevent/timeout", "gevent/_waiter")),
]


def part_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        for part, marks in PARTS:
            if any(mark in frame for mark in marks):
                return part
    return "Locust and the rest"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=1024)
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        sys.exit("py-spy is not installed: pip install py-spy")
    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results, raw = Path(tmp) / "results.json", Path(tmp) / "profile.txt"
            locust = [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "-H", url,
                      "--headless", "-u", str(args.streams), "-r", str(args.streams), "-t", f"{args.seconds + 3}s",
                      "--processes", "1", "--metrics-port", "0", "--stop-timeout", "10", "--max-tokens", str(TOKENS),
                      "--warmup-seconds", "3", "--results-json", str(results), "--only-summary"]
            done = subprocess.run([spy, "record", "--native", "--subprocesses", "--rate", "200", "--format", "raw",
                                   "--output", str(raw), "--", *locust], capture_output=True, text=True,
                                  timeout=args.seconds + 300, preexec_fn=pinned(CLIENT_CORE))
            if not results.exists() or not raw.exists():
                sys.exit(f"no profile:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
            data = json.loads(results.read_text())
            samples: Counter[str] = Counter()
            for line in raw.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if "gevent/threadpool.py" in stack:
                    continue  # the resolver's thread, waiting on its queue: sampled, but no CPU spent
                samples[part_of(stack.split(";"))] += int(count)
    finally:
        server.terminate()
        server.wait(10)
    cpu = sum(data["busy"].values()) * (data["ended_at"] - data["started_at"])
    chunks = data["total_output_tokens"]
    per_chunk = cpu / chunks * 1e6
    total = sum(samples.values())
    print(f"{args.streams} streams on core {CLIENT_CORE}, the server (TTFT {TTFT * 1000:.0f} ms, a token every "
          f"{ITL * 1000:.0f} ms, {TOKENS} tokens) on the other: {chunks} chunks, {cpu:.1f} s of CPU, "
          f"{per_chunk:.1f} us a chunk; {total} samples")
    for part, n in samples.most_common():
        print(f"  {part:<22} {n / total:>6.1%}  {per_chunk * n / total:>5.1f} us")
    print(f"os.cpu_count {os.cpu_count()}; median TTFT {data['median_ttft_ms']:.1f} ms")


if __name__ == "__main__":
    main()
