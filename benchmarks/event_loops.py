"""The floor under the load generator's per-chunk cost, and what a whole client costs on each floor.

Floors: what one event loop spends to wake a stream and read one chunk, with no HTTP parsing, no
JSON and no metrics. gevent is the loop Locust runs on: a greenlet woken for each read (`gevent`),
or one io watcher a socket whose callback reads in the hub (`hub`, what loadwatch's reader stands
on, client/reader.py: the load generator's floor). asyncio and uvloop are what an asyncio client
would stand on (uvloop comes from the embedded engine's venv, where vLLM brings it; rows that need
that venv are skipped without one).

Whole clients, without Locust: loadwatch's reader (geventhttpclient on gevent, each chunk decoded,
parsed and timed, as a run does it) and aiohttp on uvloop (what `vllm bench serve` reads with),
each SSE line parsed as JSON (msgspec). The gap between the two is what another client would save.
Each row holds --streams keep-alive connections to the fake server of tests/ as benchmarks/fidelity.py
starts it (TTFT 150 ms, 24 tokens 20 ms apart: a chunk per read; the server on one core, the row on
the other), sending a request and reading until its stream ends, for
--seconds; it prints the process's CPU per read (floors) or per content chunk (clients), and the
server's lag behind its schedule (median, p99, the share of chunks over 5 ms late). The floors'
rows read at the least cost a client can, so their lag is how far one server core reaches on this
machine: where it is over 2 ms at the p99, benchmarks/fidelity.py's rows of that many streams cannot
count whichever client runs. Compare with loadwatch's CPU per chunk in a Locust run, in
benchmarks/fidelity.py.

    .venv/bin/python benchmarks/event_loops.py [--streams 256] [--seconds 12]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REQUEST = (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": 50}')
HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
END = b"0\r\n\r\n"  # the last chunk of a chunked body


def cpu_now() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_gevent(port: int, streams: int, seconds: float) -> tuple[int, float]:
    from gevent import monkey

    monkey.patch_all()
    import socket

    import gevent

    request, reads, stop = HEAD % len(REQUEST) + REQUEST, [0], time.time() + seconds

    def user() -> None:
        sock = socket.create_connection(("127.0.0.1", port))
        while time.time() < stop:
            sock.sendall(request)
            data = b""
            while not data.endswith(END):
                data += sock.recv(65536)
                reads[0] += 1
        sock.close()

    cpu = cpu_now()
    gevent.joinall([gevent.spawn(user) for _ in range(streams)])
    return reads[0], cpu_now() - cpu


def run_hub(port: int, streams: int, seconds: float) -> tuple[int, float]:
    """loadwatch's reader without its parsing: one io watcher a socket, its callback in gevent's hub."""
    import socket

    from gevent.event import Event
    from gevent.hub import get_hub

    request, reads, ended, stop = HEAD % len(REQUEST) + REQUEST, [0], [0], time.time() + seconds
    loop, finished = get_hub().loop, Event()

    def on_read(sock: socket.socket, watcher, got: list[bytes]) -> None:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        reads[0] += 1
        got[0] = got[0][-len(END):] + data
        if got[0].endswith(END):
            if time.time() < stop:
                sock.send(request)
                return
            watcher.stop()
            ended[0] += 1
            if ended[0] == streams:
                finished.set()

    for _ in range(streams):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        watcher = loop.io(sock.fileno(), 1)
        watcher.start(on_read, sock, watcher, [b""])
        sock.send(request)
    cpu = cpu_now()
    finished.wait()
    return reads[0], cpu_now() - cpu


def run_asyncio(port: int, streams: int, seconds: float) -> tuple[int, float]:
    import asyncio

    request, reads, stop = HEAD % len(REQUEST) + REQUEST, [0], time.time() + seconds

    class Stream(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            self.transport, self.data = transport, b""
            transport.write(request)

        def data_received(self, data: bytes) -> None:
            reads[0] += 1
            self.data += data
            if self.data.endswith(END):
                self.data = b""
                if time.time() < stop:
                    self.transport.write(request)
                else:
                    self.transport.close()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        cpu = cpu_now()
        for _ in range(streams):
            await loop.create_connection(Stream, "127.0.0.1", port)
        await asyncio.sleep(seconds + 1)
        return cpu_now() - cpu

    cpu = asyncio.run(main())
    return reads[0], cpu


def run_loadwatch(port: int, streams: int, seconds: float) -> tuple[int, float]:
    from gevent import monkey

    monkey.patch_all()
    import gevent

    from loadwatch.client.stream import Streamer
    from loadwatch.settings import LoadSettings

    # As a run asks: the usage chunk gives the token counts (without it, the text would be counted).
    body = {**json.loads(REQUEST), "stream_options": {"include_usage": True}}
    chunks, stop = [0], time.time() + seconds

    def user() -> None:
        streamer = Streamer(f"http://127.0.0.1:{port}", None, 60.0, LoadSettings().max_line_bytes)
        while time.time() < stop:
            timing = streamer.stream("chat", body).timing
            chunks[0] += len(timing.content_arrivals) if timing else 0
        streamer.close()

    cpu = cpu_now()
    gevent.joinall([gevent.spawn(user) for _ in range(streams)])
    return chunks[0], cpu_now() - cpu


def run_aiohttp(port: int, streams: int, seconds: float) -> tuple[int, float]:
    import asyncio

    import aiohttp
    from msgspec.json import decode

    chunks, stop = [0], time.time() + seconds

    async def user(session: aiohttp.ClientSession) -> None:
        while time.time() < stop:
            async with session.post(f"http://127.0.0.1:{port}/v1/chat/completions", data=REQUEST,
                                    headers={"Content-Type": "application/json"}) as response:
                async for line in response.content:
                    if line.startswith(b"data: {"):
                        choices = decode(line[6:])["choices"]
                        if choices and choices[0]["delta"].get("content"):
                            chunks[0] += 1

    async def main() -> float:
        cpu = cpu_now()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await asyncio.gather(*(user(session) for _ in range(streams)))
        return cpu_now() - cpu

    cpu = asyncio.run(main())
    return chunks[0], cpu


RUNS = {"gevent": run_gevent, "hub": run_hub, "asyncio": run_asyncio, "uvloop": run_asyncio, "loadwatch": run_loadwatch,
        "aiohttp": run_aiohttp}


def child(row: str, port: int, streams: int, seconds: float) -> None:
    if row in ("uvloop", "aiohttp"):
        import uvloop

        uvloop.install()
    print(*RUNS[row](port, streams, seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=12)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.streams, args.seconds)
        return
    # Here, not at the top: the children run this file in interpreters without loadwatch (uvloop's).
    from fidelity import CLIENT_CORE, get, pinned, server_late, start_server

    from loadwatch.engine.settings import EngineSettings

    engine = EngineSettings().python
    here = Path(sys.executable)
    rows = [("gevent", here), ("hub", here), ("asyncio", here), ("uvloop", engine), ("loadwatch", here),
            ("aiohttp", engine)]
    print(f"{args.streams} streams, {args.seconds:g} s each; fake server: a chunk every 20 ms a stream")
    print(f"{'row':<10} {'count':>8} {'CPU s':>6} {'CPU each':>13}  server lag p50 / p99 / late")
    for name, python in rows:
        if not python.exists():
            print(f"{name:<10} (skipped: no {python})")
            continue
        server, url = start_server()
        try:
            time.sleep(0.5)
            out = subprocess.run([str(python), str(HERE), "--streams", str(args.streams), "--seconds",
                                  str(args.seconds), "--child", name, url.rsplit(":", 1)[1]],
                                 capture_output=True, text=True, timeout=args.seconds + 120,
                                 preexec_fn=pinned(CLIENT_CORE))
            stats = get(url + "/stats")
        finally:
            server.terminate()
            server.wait(10)
        if out.returncode:
            print(f"{name:<10} (failed: {out.stderr.strip().splitlines()[-1:]})")
            continue
        reads, cpu = out.stdout.split()
        why = server_late(stats)
        late = f"  (server late: {why})" if why else ""
        print(f"{name:<10} {int(reads):>8} {float(cpu):>6.2f} {float(cpu) / int(reads) * 1e6:>10.1f} µs  "
              f"{stats['lag_median_ms']:.1f} / {stats['lag_p99_ms']:.1f} ms / {stats['late_share']:.1%}{late}",
              flush=True)


if __name__ == "__main__":
    main()
