"""The floor under the load generator's per-chunk cost: what one event loop spends to wake a stream
and read one chunk, with no HTTP parsing, no JSON and no metrics.

Each loop holds --streams keep-alive connections to the fake server of tests/ (TTFT 100 ms, 50
tokens 20 ms apart: a chunk per read), sending a request and reading until its stream ends, for
--seconds; it prints the process's CPU per read. gevent is the loop Locust runs on (the load
generator's floor); asyncio and uvloop are what an asyncio client would stand on (uvloop comes
from the embedded engine's venv, where vLLM brings it; it is skipped without one). Compare with
loadwatch's own CPU per chunk in benchmarks/fidelity.py.

    .venv/bin/python benchmarks/event_loops.py [--streams 256] [--seconds 12]
"""

from __future__ import annotations

import argparse
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


def child(loop: str, port: int, streams: int, seconds: float) -> None:
    if loop == "uvloop":
        import uvloop

        uvloop.install()
    reads, cpu = run_gevent(port, streams, seconds) if loop == "gevent" else run_asyncio(port, streams, seconds)
    print(reads, cpu)


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
    from fidelity import start_server

    from loadwatch.engine.settings import EngineSettings

    engine = EngineSettings().python
    loops = [("gevent", Path(sys.executable)), ("asyncio", Path(sys.executable)), ("uvloop", engine)]
    print(f"{args.streams} streams, {args.seconds:g} s each; fake server: a chunk every 20 ms a stream")
    print(f"{'loop':<8} {'reads':>8} {'CPU s':>6} {'CPU per read':>13}")
    for name, python in loops:
        if not python.exists():
            print(f"{name:<8} (skipped: no {python})")
            continue
        server, url = start_server(0.02)
        try:
            time.sleep(0.5)
            out = subprocess.run([str(python), str(HERE), "--streams", str(args.streams), "--seconds",
                                  str(args.seconds), "--child", name, url.rsplit(":", 1)[1]],
                                 capture_output=True, text=True, timeout=args.seconds + 120)
        finally:
            server.terminate()
            server.wait(10)
        if out.returncode:
            print(f"{name:<8} (failed: {out.stderr.strip().splitlines()[-1:]})")
            continue
        reads, cpu = out.stdout.split()
        print(f"{name:<8} {int(reads):>8} {float(cpu):>6.2f} {float(cpu) / int(reads) * 1e6:>10.1f} µs", flush=True)


if __name__ == "__main__":
    main()
