"""The master's memory over a long run: flat, whatever the number of requests.

A simulated run at --rate requests/s (default 200) for --hours (default 1) of run time, each request
with --tokens output tokens (default 128, so 127 inter-token gaps): two workers record them and ship
a report every 3 s of run time, as Locust's workers do, and the master merges the reports and
writes the per-request records to a file, as in a run with --results-json. It prints the master's
RSS every simulated ten minutes, the results' size, and what one end-of-run summary costs.

    .venv/bin/python benchmarks/master_memory.py [--rate 200] [--hours 1] [--tokens 128]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import psutil

from loadwatch.loadgen.recorder import LLMRequest, Recorder
from loadwatch.metrics.summary import summarize
from loadwatch.metrics.timing import RawTiming, request_metrics

REPORT_EVERY = 3.0  # seconds of run time, as Locust's workers report


def request(rng: random.Random, at: float, tokens: int, n: int) -> LLMRequest:
    ttft = rng.lognormvariate(-1.6, 0.5)
    arrivals, t = [], ttft
    for _ in range(tokens):
        arrivals.append(t)
        t += rng.lognormvariate(-3.9, 0.3)
    if n % 50 == 0:
        return LLMRequest("model", "chat", at, 1.0, None, "http_503", request_id=f"{n:032x}")
    return LLMRequest("model", "chat", at, arrivals[-1], request_metrics(RawTiming(0.0, tuple(arrivals), 512, tokens)),
                      request_id=f"{n:032x}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    rng = random.Random(0)
    master, workers = Recorder(), [Recorder(), Recorder()]
    for i, recorder in enumerate([master, *workers]):
        recorder.configure([], keep_records=True, keep_itl=False)
        recorder.worker = str(i)
    me = psutil.Process()
    seconds = args.hours * 3600
    per_report = int(args.rate * REPORT_EVERY)
    n = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "requests.jsonl"
        with open(records, "w") as out:
            print(f"{'run time':>9} {'requests':>10} {'master RSS':>11}")
            clock = 0.0
            next_print = 0.0
            while clock <= seconds:
                for _ in range(per_report):
                    workers[n % 2].record(request(rng, clock, args.tokens, n))
                    n += 1
                for worker in workers:
                    master.merge(json.loads(json.dumps(worker.report())))  # through a wire, as msgpack carries it
                out.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in master.take_records()))
                if clock >= next_print:
                    print(f"{clock / 60:>7.0f} m {n:>10,} {me.memory_info().rss / 2**20:>9.1f} MiB", flush=True)
                    next_print += 600
                clock += REPORT_EVERY
            size = out.tell()
    t = time.perf_counter()
    result, _ = summarize(master.samples, [])
    summary_ms = (time.perf_counter() - t) * 1000
    print(f"\n{n:,} requests ({args.rate:g}/s for {args.hours:g} h of run time) simulated in "
          f"{time.perf_counter() - started:.0f} s; records file {size / 2**20:.0f} MiB "
          f"({size / n:.0f} bytes a request)")
    print(f"end-of-run summary: {summary_ms:.1f} ms; p99 TTFT {result['p99_ttft_ms']:.1f} ms over "
          f"{result['completed']:,} requests; results JSON {len(json.dumps(result)) / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
