"""How many workers one Locust master holds: a real master (loadwatch's plugin, --results-json, so
every record is written) against simulated workers that speak Locust's protocol and report as a
worker of --streams concurrent streams does.

Each simulated worker connects, says it is ready, sends a heartbeat every second and, every 3 s as
Locust's workers do, a report: Locust's own stats and loadwatch's (histogram deltas and one record a
request), made once by loadwatch's Recorder from the requests such a worker finishes in 3 s
(--streams streams of --tokens tokens at 30 ms a token after a 200 ms first token: 500 streams of
128 tokens finish about 125 requests a second) and sent again every 3 s. At the stop it answers the
master's flush with its last report. The master writes every record it receives (--results-json).

For each number of workers it prints the master's CPU (share of one core over the measured window),
its memory, the size of one report, and how far behind the master's event loop fell (its own
loadwatch_client_event_loop_lag_seconds, p99 over the window).

    .venv/bin/python benchmarks/master_scale.py [--workers 16 32 64] [--streams 500] [--seconds 30]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import gevent
import msgpack
import psutil
import zmq.green as zmq
from locust import __version__ as LOCUST_VERSION  # loadwatch imports Locust, which patches for gevent
from locust.rpc.protocol import Message
from locust.stats import RequestStats, StatsEntry
from prometheus_client.parser import text_string_to_metric_families

from loadwatch.loadgen.recorder import REPORT_KEY, LLMRequest, Recorder
from loadwatch.loadgen.sending.quota import FINAL, FLUSH
from loadwatch.metrics.timing import RawTiming, request_metrics

REPO = Path(__file__).resolve().parents[1]
REPORT_EVERY = 3.0
TTFT, ITL = 0.2, 0.03


def finished_per_report(streams: int, tokens: int) -> int:
    return round(streams / (TTFT + ITL * (tokens - 1)) * REPORT_EVERY)


def loadwatch_report(n: int, tokens: int) -> dict:
    """loadwatch's part of one report of n requests, made by its own Recorder: made once and sent
    again and again, so that this process keeps up with the reports of many workers."""
    recorder, rng = Recorder(), random.Random(0)
    recorder.configure([], keep_records=True, keep_itl=False)
    recorder.worker = "sim"
    now = time.time()
    for _ in range(n):
        arrivals = [rng.lognormvariate(-1.6, 0.3) + ITL * k for k in range(tokens)]
        recorder.record(LLMRequest("model", "chat", now - arrivals[-1], arrivals[-1],
                                   request_metrics(RawTiming(0.0, tuple(arrivals), 512, tokens)),
                                   request_id=uuid.uuid4().hex))
    return recorder.report()


def report(n: int, streams: int, tokens: int) -> dict:
    """A whole report as a worker sends it: Locust's stats and loadwatch's."""
    stats = RequestStats()
    entry = StatsEntry(stats, "chat", "POST")
    for _ in range(n):
        entry.log(4000, 0)
    total = StatsEntry(stats, "Aggregated", "")
    total.extend(entry)
    return {"stats": [entry.get_stripped_report()], "stats_total": total.get_stripped_report(), "errors": {},
            "user_count": streams, "user_classes_count": {"ChatUser": streams}, REPORT_KEY: loadwatch_report(n, tokens)}


class SimulatedWorker:
    """Locust's worker protocol as far as a master needs it: ready, heartbeats, spawned, reports,
    and the last report when loadwatch's master asks for it."""

    def __init__(self, port: int, streams: int, data: dict, last: dict) -> None:
        self.id = f"sim-{uuid.uuid4().hex[:8]}"
        self.socket = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.IDENTITY, self.id.encode())
        self.socket.connect(f"tcp://127.0.0.1:{port}")
        self.streams, self.data, self.last = streams, data, last
        self.greenlets: list[gevent.Greenlet] = []
        self.state = "ready"  # as its heartbeats say: the master counts ready workers before it starts

    def send(self, kind: str, data) -> None:
        self.socket.send(Message(kind, data, self.id).serialize())

    def listen(self) -> None:
        while True:
            msg = Message.unserialize(self.socket.recv())
            if msg.type == "spawn":
                self.state = "running"
                self.send("spawning", None)
                self.send("spawning_complete", {"user_classes_count": {"ChatUser": self.streams},
                                                "user_count": self.streams})
            elif msg.type == FLUSH:
                self.send(FINAL, self.last)

    def beat(self) -> None:
        while True:
            self.send("heartbeat", {"state": self.state, "current_cpu_usage": 50.0, "current_memory_usage": 2**28})
            gevent.sleep(1.0)

    def report(self) -> None:
        gevent.sleep(REPORT_EVERY * random.random())  # workers' reports do not come in step
        while True:
            self.send("stats", self.data)
            gevent.sleep(REPORT_EVERY)

    def start(self) -> None:
        self.send("client_ready", LOCUST_VERSION)
        self.greenlets = [gevent.spawn(self.listen), gevent.spawn(self.beat), gevent.spawn(self.report)]

    def stop(self) -> None:
        gevent.killall(self.greenlets)
        self.socket.close(0)


def lag_p99(metrics_url: str) -> float | None:
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "loadwatch_client_event_loop_lag_seconds":
            buckets = sorted((float(s.labels["le"]), s.value) for s in family.samples
                             if s.name.endswith("_bucket") and s.labels.get("worker") == "master")
            if not buckets or not buckets[-1][1]:
                return None
            return next(le for le, n in buckets if n >= 0.99 * buckets[-1][1])
    return None


def measure(workers: int, streams: int, tokens: int, seconds: float) -> dict:
    from tests.conftest import free_port

    port, metrics_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        master = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "--master", "--headless",
             "-H", "http://127.0.0.1:9", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
             "--expect-workers", str(workers), "-u", str(workers * streams), "-r", str(workers * streams),
             "-t", f"{seconds + 10:g}s", "--metrics-port", str(metrics_port),
             "--results-json", str(Path(tmp) / "results.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        n = finished_per_report(streams, tokens)
        data, last = report(n, streams, tokens), report(0, streams, tokens)[REPORT_KEY]
        size = len(msgpack.packb(data, default=str))
        sims = [SimulatedWorker(port, streams, data, last) for _ in range(workers)]
        for sim in sims:
            sim.start()
        me = psutil.Process(master.pid)
        gevent.sleep(10)  # connected, spawned, a few reports in
        cpu0, t0 = sum(me.cpu_times()[:2]), time.monotonic()
        gevent.sleep(seconds)
        cpu = (sum(me.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0)
        rss = me.memory_info().rss
        lag = lag_p99(f"http://127.0.0.1:{metrics_port}/metrics")
        while master.poll() is None:
            gevent.sleep(0.5)
        for sim in sims:
            sim.stop()
        with open(Path(tmp) / "results.requests.jsonl") as records_file:
            records = sum(1 for _ in records_file)
    return {"workers": workers, "streams": workers * streams, "cpu": cpu, "rss": rss, "report": size, "lag": lag,
            "records": records, "requests_per_s": workers * n / REPORT_EVERY}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    print(f"{'workers':>7} {'streams':>8} {'req/s':>7} {'master CPU':>10} {'RSS MB':>7} {'report KB':>9} "
          f"{'loop lag p99':>12} {'records':>8}")
    for n in args.workers:
        r = measure(n, args.streams, args.tokens, args.seconds)
        lag = f"{r['lag'] * 1000:.0f} ms" if r["lag"] is not None else "n/a"
        print(f"{r['workers']:>7} {r['streams']:>8} {r['requests_per_s']:>7.0f} {r['cpu']:>9.0%} "
              f"{r['rss'] / 2**20:>7.0f} {r['report'] / 1024:>9.0f} {lag:>12} {r['records']:>8}", flush=True)


if __name__ == "__main__":
    main()
