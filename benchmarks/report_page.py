"""What a large run's report costs: a run folder of --requests per-request records (default a
million, an hour at 280 requests/s, each joined with the engine's account), then `loadwatch report`
on it without Prometheus. It prints the time and peak memory the report took, the size of
report.html, and how long headless Chromium takes to open it from disk and draw every chart.

    .venv/bin/python benchmarks/report_page.py [--requests 1000000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

from loadwatch.metrics.records import as_record
from loadwatch.metrics.timing import EngineAccount, RequestMetrics
from loadwatch.report.build import build_report


def records_file(path: Path, n: int, rate: float) -> float:
    """n records, `rate` a second, the latency climbing half-way as a saturating server's would; the run's length."""
    rng = random.Random(1)
    with open(path, "w") as out:
        for i in range(n):
            queue = rng.expovariate(1 / (0.002 if i < n // 2 else 0.4))
            prefill = rng.uniform(0.01, 0.05)
            ttft = 0.006 + queue + prefill + rng.uniform(0.002, 0.01)
            e2e = ttft + rng.uniform(0.5, 1.5)
            m = RequestMetrics(ttft=ttft, e2e=e2e, itl=(), tpot=(e2e - ttft) / 127, prompt_tokens=200,
                               completion_tokens=128, headers=0.006,
                               engine=EngineAccount(queue=queue, prefill=prefill, decode=e2e - ttft, mean_itl=0.008))
            failure = "http_500" if rng.random() < 0.001 else None
            record = as_record(f"{i:032x}", 1795000000.0 + i / rate, "local", "m", "chat", "load", e2e, failure,
                               None if failure else m, "usage", False)
            out.write(json.dumps(record) + "\n")
    return n / rate


def chromium_seconds(page: Path) -> float | None:
    chromium = shutil.which("chromium")
    if chromium is None:
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
        tab = browser.new_context(offline=True).new_page()
        started = time.perf_counter()
        tab.goto(page.as_uri())
        tab.wait_for_function("() => window.Bokeh && Object.keys(Bokeh.index).length > 0", timeout=120_000)
        seconds = time.perf_counter() - started
        browser.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=280.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder)
        duration = records_file(run / "results.requests.jsonl", args.requests, args.rate)
        results = {"run_id": "big", "target": "http://x", "started_at": 1795000000.0,
                   "ended_at": 1795000000.0 + duration, "completed": args.requests, "failed": 0, "duration": duration,
                   "request_throughput": args.rate, "request_goodput": args.rate, "output_throughput": 128 * args.rate,
                   "total_token_throughput": 328 * args.rate, "failure_ratio": 0.0, "failures": {}, "stages": [],
                   "slo": [], "records": "results.requests.jsonl"}
        (run / "results.json").write_text(json.dumps(results))
        started = time.perf_counter()
        build_report(run / "results.json", None, run)
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        size = (run / "report.html").stat().st_size / 1e6
        opened = chromium_seconds(run / "report.html")
        print(f"{args.requests:,} requests over {duration / 3600:.2f} h: report in {seconds:.1f} s, peak RSS "
              f"{peak:,.0f} MiB; report.html {size:.1f} MB"
              + (f", drawn by Chromium in {opened:.1f} s" if opened is not None else ""))


if __name__ == "__main__":
    main()
