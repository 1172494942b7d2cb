"""CPU the engine sidecar spends: per payload, and sampling 4 targets every second.

The payload is the real 644-line /metrics of vLLM 0.32 (CPU build) served by local HTTP servers.

    .venv/bin/python benchmarks/exporter_cpu.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import resource
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from loadwatch.exporter.collector import EngineCollector
from loadwatch.exporter.normalize import normalize
from loadwatch.exporter.sampler import TargetSampler
from loadwatch.exporter.settings import Target

PAYLOAD = Path(__file__).resolve().parents[1] / "tests" / "data" / "payloads" / "vllm-0.32-idle-after-load.txt"


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def per_payload(text: str, repeat: int = 200) -> tuple[float, float]:
    started = time.process_time()
    for _ in range(repeat):
        normalize(text, "bench")
    ours = (time.process_time() - started) / repeat
    started = time.process_time()
    for _ in range(repeat // 4):
        list(text_string_to_metric_families(text))
    whole = (time.process_time() - started) / (repeat // 4)
    return ours, whole


def serve(body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def four_targets(body: bytes, seconds: float) -> tuple[float, float, int]:
    servers = [serve(body) for _ in range(4)]
    samplers = [TargetSampler(Target(name=f"t{i}", url=f"http://127.0.0.1:{s.server_address[1]}"),
                              interval=1.0, window=15.0, timeout=2.0) for i, s in enumerate(servers)]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(samplers))
    # The local servers run in this process too, so the figure includes serving the payloads:
    # an upper bound of the sidecar's own cost.
    started_cpu, started = cpu(), time.monotonic()
    for s in samplers:
        s.start()
    scrapes = 0
    while time.monotonic() - started < seconds:
        time.sleep(15.0 if seconds >= 30 else 5.0)
        generate_latest(registry)
        scrapes += 1
    spent = cpu() - started_cpu
    for s in samplers:
        s.stop()
    for server in servers:
        server.shutdown()
    return spent / (time.monotonic() - started), spent, scrapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    text = PAYLOAD.read_text()
    ours, whole = per_payload(text)
    print(f"payload: {len(text.splitlines())} lines, {len(text)} bytes")
    print(f"normalise one payload (filter + parse + map): {ours * 1000:.2f} ms CPU")
    print(f"prometheus_client parse of the whole payload:  {whole * 1000:.2f} ms CPU (for comparison)")
    rate, spent, scrapes = four_targets(text.encode(), args.seconds)
    print(f"4 targets sampled every 1 s for {args.seconds:g} s, {scrapes} scrapes of the sidecar: "
          f"{rate * 100:.1f} % of one core ({spent:.2f} s CPU, fetch and serve included)")


if __name__ == "__main__":
    main()
