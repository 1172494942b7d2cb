"""What the web UI's history costs the master: one point a second, whatever the run has seen.
It fills a run's samples with N requests (10 scenarios x 3 stages) and times History.sample()
and the /loadwatch/history answer of a full hour of points.

    .venv/bin/python benchmarks/history_cost.py [--sizes 1000,100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from loadwatch.loadgen.state import RunState
from loadwatch.loadgen.webui.history import POINTS, History
from loadwatch.metrics.timing import RequestMetrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    args = parser.parse_args()
    print(f"{'requests':>10} {'one point (ms)':>15} {'an hour as JSON (KB)':>21} {'its encoding (ms)':>18}")
    for n in (int(v) for v in args.sizes.split(",")):
        rng = random.Random(0)
        state = RunState(["chat"], "http://x")
        for i in range(n):
            ttft = rng.lognormvariate(-2, 0.5)
            state.recorder.samples.of(("m", f"s{i % 10}", f"step-{i % 3}")).add_success(
                0.0, RequestMetrics(ttft, ttft + 1, (0.01,) * 15, 0.01, 100, 16))
        history = History(state, lambda: 8)
        for t in range(POINTS):
            history.sample(now=float(t))
        started = time.perf_counter()
        for t in range(POINTS, POINTS + 20):
            history.sample(now=float(t))
        per_point = (time.perf_counter() - started) / 20 * 1000
        started = time.perf_counter()
        body = json.dumps(history.as_dict())
        encoding = (time.perf_counter() - started) * 1000
        print(f"{n:>10,} {per_point:>15.2f} {len(body) / 1024:>21.0f} {encoding:>18.1f}")


if __name__ == "__main__":
    main()
