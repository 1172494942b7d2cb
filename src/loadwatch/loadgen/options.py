"""loadwatch's options on Locust's own parser: command line, LOCUST_* env vars, locust.conf."""

from __future__ import annotations

import argparse

from loadwatch.metrics.slo import parse_slo


def _slo_text(text: str) -> str:
    # Kept as text: Locust ships custom options to workers with msgpack.
    try:
        parse_slo(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_options(parser, **_kwargs) -> None:
    # Locust's own add_argument, never a group's: only it knows is_secret and the web UI fields.
    add_request_options(parser)
    add_run_options(parser)
    add_dataset_options(parser)


def add_request_options(parser) -> None:
    parser.add_argument("--model", default="", env_var="LOCUST_MODEL",
                        help="Model to request; default: the first one the server lists at /v1/models")
    parser.add_argument("--endpoint", default="chat", choices=["chat", "completions"], env_var="LOCUST_ENDPOINT",
                        help="OpenAI API to stream from: /v1/chat/completions or /v1/completions")
    parser.add_argument("--max-tokens", type=int, default=128, env_var="LOCUST_MAX_TOKENS",
                        help="max_tokens of each request")
    parser.add_argument("--temperature", type=float, default=None, env_var="LOCUST_TEMPERATURE",
                        help="Sampling temperature; default: the server's")
    parser.add_argument("--ignore-eos", action="store_true", default=False, env_var="LOCUST_IGNORE_EOS",
                        help="Ask vLLM to generate max_tokens whatever the model says (vLLM's ignore_eos)")
    parser.add_argument("--api-key", default=None, env_var="OPENAI_API_KEY", is_secret=True,
                        help="Bearer token for the server; default: $OPENAI_API_KEY")
    parser.add_argument("--request-timeout", type=float, default=600.0, env_var="LOCUST_REQUEST_TIMEOUT",
                        help="Seconds a whole streamed request may take before it counts as a timeout")
    parser.add_argument("--metrics-port", type=int, default=9646, env_var="LOCUST_METRICS_PORT",
                        include_in_web_ui=False,
                        help="Port of the Prometheus endpoint of the master or local runner; 0 turns it off")
    parser.add_argument("--results-json", default=None, env_var="LOCUST_RESULTS_JSON",
                        help="Write the run's results (vllm bench serve keys and loadwatch's own) to this file")
    # default None, not []: the web UI turns a list option back into ints.
    parser.add_argument("--slo", type=_slo_text, action="append", default=None, env_var="LOCUST_SLO",
                        help="Service-level objective, repeatable: ttft_p99_ms=500, tpot_median_ms=50, "
                            "e2el_p90_ms=20000, failure_ratio=0.01 (comma-separated in the web UI). "
                            "A broken one makes a headless run exit 3")


def add_run_options(parser) -> None:
    parser.add_argument("--request-rate", type=float, default=None, env_var="LOCUST_REQUEST_RATE",
                        help="Open loop: requests per second over the whole run, sent whether or not earlier "
                             "ones have answered; each user is an arrival process of rate/users")
    parser.add_argument("--burstiness", type=float, default=1.0, env_var="LOCUST_BURSTINESS",
                        help="Open loop: gamma shape of the gaps; 1 is Poisson, lower is burstier")
    parser.add_argument("--max-concurrency", type=int, default=None, env_var="LOCUST_MAX_CONCURRENCY",
                        help="Open loop: requests in flight at most; an arrival over it is dropped and counted")
    parser.add_argument("--num-requests", type=int, default=None, env_var="LOCUST_NUM_REQUESTS",
                        help="Stop after exactly this many measured requests, across all workers "
                             "(vllm bench serve's --num-prompts)")
    parser.add_argument("--warmup-requests", type=int, default=0, env_var="LOCUST_WARMUP_REQUESTS",
                        help="Send this many requests first and leave them out of every figure")
    parser.add_argument("--warmup-seconds", type=float, default=0.0, env_var="LOCUST_WARMUP_SECONDS",
                        help="Leave out the requests started in the first seconds of the run")
    parser.add_argument("--shape", default=None, choices=["step", "ramp", "spike", "sweep"], env_var="LOCUST_SHAPE",
                        include_in_web_ui=False,
                        help="Load shape, stage by stage: step (up to -u users, or --request-rate, in --step-size "
                             "steps), ramp (0 to peak, then hold), spike (base, peak, base) or sweep (--sweep levels)")
    parser.add_argument("--stage-duration", type=float, default=60.0, env_var="LOCUST_STAGE_DURATION",
                        help="Seconds each stage of --shape lasts")
    parser.add_argument("--step-size", type=float, default=None, env_var="LOCUST_STEP_SIZE",
                        help="step: users (or requests/s) added at each step; default a quarter of the peak")
    parser.add_argument("--spike-base", type=float, default=None, env_var="LOCUST_SPIKE_BASE",
                        help="spike: users (or requests/s) before and after the spike; default a quarter of the peak")
    parser.add_argument("--sweep", default=None, env_var="LOCUST_SWEEP",
                        help="sweep: comma-separated levels, one stage each: user counts, or request rates "
                             "with --request-rate")


def add_dataset_options(parser) -> None:
    parser.add_argument("--dataset", default="builtin", env_var="LOCUST_DATASET",
                        choices=["builtin", "sharegpt", "random", "prefix-repetition", "agent", "jsonl"],
                        help="Workload: builtin prompts, sharegpt, random, prefix-repetition, agent (the seeds' "
                            "long conversation with a date-time prefix) or jsonl")
    parser.add_argument("--dataset-path", default=None, env_var="LOCUST_DATASET_PATH",
                        help="Dataset file; default: loadwatch's own sample for sharegpt, agent and jsonl")
    parser.add_argument("--seed", type=int, default=0, env_var="LOCUST_SEED",
                        help="Seed of the dataset's sampling and order")
    parser.add_argument("--dataset-size", type=int, default=1000, env_var="LOCUST_DATASET_SIZE",
                        help="Prompts drawn from the dataset (then served in a cycle)")
    parser.add_argument("--sharegpt-output-len", type=int, default=None, env_var="LOCUST_SHAREGPT_OUTPUT_LEN",
                        help="sharegpt: fixed max_tokens instead of the first answer's token length")
    parser.add_argument("--input-len", type=int, default=1024, env_var="LOCUST_INPUT_LEN",
                        help="random: prompt tokens")
    parser.add_argument("--output-len", type=int, default=None, env_var="LOCUST_OUTPUT_LEN",
                        help="random, prefix-repetition, agent: max_tokens; default --max-tokens")
    parser.add_argument("--range-ratio", type=float, default=0.0, env_var="LOCUST_RANGE_RATIO",
                        help="random: lengths drawn uniformly within +-ratio of the mean")
    parser.add_argument("--prefix-len", type=int, default=0, env_var="LOCUST_PREFIX_LEN",
                        help="random: shared prefix tokens; prefix-repetition: tokens of each prefix (default 256)")
    parser.add_argument("--num-prefixes", type=int, default=10, env_var="LOCUST_NUM_PREFIXES",
                        help="prefix-repetition: distinct shared prefixes")
    parser.add_argument("--suffix-len", type=int, default=256, env_var="LOCUST_SUFFIX_LEN",
                        help="prefix-repetition: unique tokens after the prefix")
    parser.add_argument("--agent-prefix", default="static", choices=["static", "dynamic"], env_var="LOCUST_AGENT_PREFIX",
                        help="agent: the same date-time for every request (cacheable) or a new one per request")
