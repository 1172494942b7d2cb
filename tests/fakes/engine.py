"""A vLLM /metrics that fills up for web-UI tests: KV cache usage climbs from 0 to 95 % over
`fill_seconds`, requests queue as it does, the prefix cache hits half its queries, and the
engine's TTFT grows with the queue. `down = True` makes it answer 503, as a dead engine's port
would refuse. `ranks`: data-parallel ranks (vLLM's `engine` label); those past the first hold 2
requests, none waiting, and a quarter of the first one's KV cache: a rank 0 out of balance."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeEngine:
    def __init__(self, fill_seconds: float = 10.0, ranks: int = 1) -> None:
        self.started = time.monotonic()
        self.ranks = ranks
        self.fill_seconds = fill_seconds
        self.down = False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if owner.down:
                    self.send_response(503)
                    self.end_headers()
                    return
                body = owner.payload().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def payload(self) -> str:
        elapsed = time.monotonic() - self.started
        fill = min(0.95, 0.95 * elapsed / self.fill_seconds)
        waiting = int(10 * fill * fill)
        requests = int(20 * elapsed)
        ttft_sum = sum(0.05 + 0.5 * min(1.0, (i / 20) / self.fill_seconds) ** 2 for i in range(requests))
        labels = 'engine="0",model_name="fake-model"'
        others = [f'engine="{rank}",model_name="fake-model"' for rank in range(1, self.ranks)]
        return "\n".join([
            "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{labels}}} 8.0",
            *(f"vllm:num_requests_running{{{other}}} 2.0" for other in others),
            "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{labels}}} {waiting}.0",
            *(f"vllm:num_requests_waiting{{{other}}} 0.0" for other in others),
            "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{labels}}} {fill:.4f}",
            *(f"vllm:kv_cache_usage_perc{{{other}}} {fill / 4:.4f}" for other in others),
            "# TYPE vllm:prefix_cache_queries_total counter",
            f"vllm:prefix_cache_queries_total{{{labels}}} {1000 * requests}.0",
            "# TYPE vllm:prefix_cache_hits_total counter",
            f"vllm:prefix_cache_hits_total{{{labels}}} {500 * requests}.0",
            "# TYPE vllm:time_to_first_token_seconds histogram",
            f'vllm:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} {requests}.0',
            f"vllm:time_to_first_token_seconds_count{{{labels}}} {requests}.0",
            f"vllm:time_to_first_token_seconds_sum{{{labels}}} {ttft_sum:.4f}",
        ]) + "\n"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
