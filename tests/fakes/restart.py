"""A `--restart` command for `loadwatch tune` against the fake server: it stops the server it started
last (its PID in --pidfile) and starts a new one on the same port with the flags given after `--`,
as a restart script of a real deployment starts vLLM with them. The fake's batch is its
--max-concurrency, so vLLM's --max-num-seqs maps onto it; --refuse names a flag (or a flag=value) it refuses as vLLM
refuses an unknown one (exit 2, vLLM's message), for the refused-flag path.

    python tests/fakes/restart.py --port 8123 --pidfile /tmp/fake.pid -- --max-num-seqs 8
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "sse_server.py"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pidfile", type=Path, required=True)
    parser.add_argument("--refuse", action="append", default=[])
    parser.add_argument("--timing", default="--ttft 0.05 --itl 0.01 --tokens 30", help="the fake's own flags")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, flags = parser.parse_args(argv[:split]), argv[split + 1:]
    vllm = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    vllm.add_argument("--max-num-seqs", type=int, default=128)
    known, _rest = vllm.parse_known_args(flags)
    for flag in flags:
        if flag in args.refuse or flag.split("=")[0] in args.refuse:
            print(f"vllm serve: error: unrecognized arguments: {flag}", file=sys.stderr)
            return 2
    if args.pidfile.exists():
        try:
            os.kill(int(args.pidfile.read_text()), signal.SIGTERM)
            time.sleep(0.3)
        except (ProcessLookupError, ValueError):
            pass
    server = subprocess.Popen([sys.executable, str(SERVER), "--port", str(args.port), "--vllm-metrics",
                               "--max-concurrency", str(known.max_num_seqs), *shlex.split(args.timing)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    line = server.stdout.readline() if server.stdout else ""
    if not line.startswith("listening"):
        print(f"the fake server did not start: {line!r}", file=sys.stderr)
        return 1
    args.pidfile.write_text(str(server.pid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
