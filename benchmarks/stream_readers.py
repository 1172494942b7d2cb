"""How fast and how faithfully one worker process reads streamed completions.

For 16, 64 and 256 concurrent streams in one gevent process (as in one Locust worker), against
the fake server of tests/ (TTFT 100 ms, ITL 20 ms, 50 tokens), it prints for each reader:
the content chunks/s sustained (users started over one second, like Locust's spawn rate), and the p50/p99 of
(measured - true) TTFT, pairing each request
with the server's own record of when it really sent the first token.

Readers: loadwatch's (geventhttpclient, every complete line of a read at once, the one the load generator
uses) and requests/urllib3's `iter_lines`, the common choice in Locust's HttpUser.

    .venv/bin/python benchmarks/stream_readers.py [--seconds 10] [--levels 16,64,256]
"""

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
import numpy as np  # noqa: E402
import requests  # noqa: E402

from loadwatch.client.stream import Streamer  # noqa: E402
from loadwatch.settings import LoadSettings  # noqa: E402

SERVER = Path(__file__).resolve().parents[1] / "tests" / "sse_server.py"
TOKENS = 50
ids = itertools.count()


def payload() -> dict:
    return {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": TOKENS,
            "stream": True, "stream_options": {"include_usage": True}, "user": f"r{next(ids)}"}


def loadwatch_reader(url: str):
    streamer = Streamer(url, None, 60.0, LoadSettings().max_line_bytes)

    def one() -> tuple[str, float | None, int]:
        body = payload()
        result = streamer.stream("chat", body)
        if result.timing is None:
            return body["user"], None, 0
        arrivals = result.timing.content_arrivals
        return body["user"], arrivals[0] - result.timing.t0, len(arrivals)

    return one


def requests_reader(url: str):
    session = requests.Session()

    def one() -> tuple[str, float | None, int]:
        body = payload()
        t0 = time.perf_counter()
        first, chunks = None, 0
        with session.post(url + "/v1/chat/completions", json=body, stream=True, timeout=60) as response:
            for line in response.iter_lines():
                now = time.perf_counter()
                if not line.startswith(b"data: {"):
                    continue
                delta = (json.loads(line[6:])["choices"] or [{}])[0].get("delta", {})
                if delta.get("content"):
                    chunks += 1
                    first = first if first is not None else now - t0
        return body["user"], first, chunks

    return one


def run_level(make_reader, url: str, streams: int, seconds: float) -> tuple[float, dict[str, float]]:
    measured: dict[str, float] = {}
    chunks = 0
    deadline = time.perf_counter() + seconds

    def user() -> None:
        nonlocal chunks
        read = make_reader(url)
        while time.perf_counter() < deadline:
            request_id, ttft, n = read()
            chunks += n
            if ttft is not None:
                measured[request_id] = ttft

    start = time.perf_counter()
    # Spread the starts over a second, as Locust's spawn rate does: users started together stay
    # in lockstep and every chunk then arrives in a burst of `streams`.
    gevent.joinall([gevent.spawn_later(i / streams, user) for i in range(streams)])
    return chunks / (time.perf_counter() - start), measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--levels", default="16,64,256")
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--ttft", "0.1", "--itl", "0.02",
                               "--tokens", str(TOKENS)], stdout=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{int(server.stdout.readline().split()[-1])}"
    print(f"{'reader':<28} {'streams':>7} {'chunks/s':>9} {'requests':>8} "
          f"{'TTFT err p50 ms':>15} {'TTFT err p99 ms':>15}")
    try:
        for streams in map(int, args.levels.split(",")):
            for name, reader in (("loadwatch (geventhttpclient)", loadwatch_reader),
                                 ("requests iter_lines", requests_reader)):
                rate, measured = run_level(reader, url, streams, args.seconds)
                truth = json.loads(requests.get(url + "/stats/ttft-by-user", timeout=10).content)
                errors = np.array([(measured[k] - truth[k]) * 1000 for k in measured if k in truth])
                p50, p99 = np.percentile(errors, [50, 99]) if errors.size else (float("nan"),) * 2
                print(f"{name:<28} {streams:>7} {rate:>9.0f} {errors.size:>8} {p50:>15.3f} {p99:>15.3f}",
                      flush=True)
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
