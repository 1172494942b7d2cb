"""loadwatch, `vllm bench serve`, GuideLLM and AIPerf on one fake server of known timing (50 ms to the
first token, 10 ms a token, 8 tokens), the same 40 requests at 4 at a time, and `loadwatch compare`
over their results: where the tools agree, and where their definitions part.

`vllm bench serve` comes from the embedded engine's venv; GuideLLM and AIPerf from a venv of their
own (6.5 GB with their torch: not a test dependency):

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install guidellm==0.8.1 aiperf==0.13.0
    .venv/bin/python benchmarks/peers.py --peers-venv /tmp/peers

A tool that is missing is said so and left out.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loadwatch.engine.settings import EngineSettings  # noqa: E402
from tests.conftest import REPO, headless_run  # noqa: E402
from tests.peers import vllm_bench_serve  # noqa: E402

REQUESTS, CONCURRENCY, TOKENS, INPUT = 40, 4, 8, 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers-venv", type=Path, default=Path("/tmp/peers"), help="GuideLLM's and AIPerf's venv")
    args = parser.parse_args()
    tokenizer = str(EngineSettings().model_dir)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        server = subprocess.Popen([sys.executable, str(REPO / "tests" / "sse_server.py"), "--port", "0", "--ttft",
                                   "0.05", "--itl", "0.01", "--tokens", str(TOKENS)], stdout=subprocess.PIPE, text=True)
        url = f"http://127.0.0.1:{server.stdout.readline().split()[-1]}"
        sides: list[str] = []
        try:
            headless_run(url, out / "loadwatch" / "results.json", "-u", str(CONCURRENCY), "-r", str(CONCURRENCY),
                         "--num-requests", str(REQUESTS), "--dataset", "random", "--input-len", str(INPUT),
                         "--max-tokens", str(TOKENS))
            sides.append(f"loadwatch={out / 'loadwatch'}")
            if vllm_bench_serve(url, out / "vllm.json", "--dataset-name", "random", "--random-input-len", str(INPUT),
                                "--random-output-len", str(TOKENS), "--num-prompts", str(REQUESTS),
                                "--max-concurrency", str(CONCURRENCY), "--request-rate", "inf", "--save-detailed"):
                sides.append(f"vllm={out / 'vllm.json'}")
            else:
                print("vllm bench serve: not run (no embedded engine venv: loadwatch engine setup)")
            guidellm, aiperf = args.peers_venv / "bin" / "guidellm", args.peers_venv / "bin" / "aiperf"
            if guidellm.exists():
                subprocess.run([str(guidellm), "run", "--backend", f"kind=openai_http,target={url}", "--profile",
                                f"kind=concurrent,streams={CONCURRENCY}", "--constraint",
                                f"kind=max_requests,count={REQUESTS}", "--data",
                                f"kind=synthetic_text,prompt_tokens={INPUT},output_tokens={TOKENS}", "--tokenizer",
                                f"kind=huggingface_auto,model={tokenizer}", "--output",
                                f"kind=json,path={out / 'guidellm.json'}", "--disable-console-interactive"],
                               capture_output=True, text=True, timeout=600)
                sides.append(f"guidellm={out / 'guidellm.json'}")
            else:
                print(f"GuideLLM: not run ({guidellm} is missing)")
            if aiperf.exists():
                subprocess.run([str(aiperf), "profile", "--model", "fake-model", "--url", url, "--endpoint-type",
                                "chat", "--streaming", "--concurrency", str(CONCURRENCY), "--request-count",
                                str(REQUESTS), "--synthetic-input-tokens-mean", str(INPUT), "--output-tokens-mean",
                                str(TOKENS), "--tokenizer", tokenizer, "--artifact-dir", str(out / "aiperf"),
                                "--ui-type", "none"], capture_output=True, text=True, timeout=600)
                sides.append(f"aiperf={out / 'aiperf' / 'profile_export_aiperf.json'}")
            else:
                print(f"AIPerf: not run ({aiperf} is missing)")
        finally:
            server.terminate()
            server.wait(10)
        subprocess.run([sys.executable, "-m", "loadwatch.cli", "compare", *sides], check=False)


if __name__ == "__main__":
    main()
