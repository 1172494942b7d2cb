"""The embedded engine made small on purpose, for `make run` and the e2e tests: a KV cache of 20
blocks of 32 tokens and 8 sequences at once, so a few users saturate it and the capacity report
names the KV cache; a context of 288 tokens fits a prompt and its answer.
`python -m loadwatch.engine.small` prints them as `loadwatch` options, for the Makefile."""

SMALL_KV = ("--num-gpu-blocks-override=20", "--max-num-seqs=8", "--max-model-len=288")

if __name__ == "__main__":
    print(" ".join(f"--vllm-arg={arg}" for arg in SMALL_KV))
