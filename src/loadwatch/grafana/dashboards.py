"""loadwatch's dashboards: the run overview (client beside engine), the engines one by one, and a
fleet (replicas behind a router) side by side."""

from __future__ import annotations

from loadwatch.catalogue import RUN_INFO, SLO_OBJECTIVE, Client, Engine, Router, total
from loadwatch.grafana.panels import (
    RATE,
    Panel,
    Row,
    dashboard,
    mean,
    prometheus_annotation,
    quantile,
    rate,
    variable,
)

C = 'model=~"$model", scenario=~"$scenario"'  # client series
# Where Kubernetes scrapes them, engine series carry the pod's namespace and name (the ServiceMonitor's
# labels); elsewhere they have none, and the variables' "All" (.*) matches the empty label too.
POD = 'namespace=~"$namespace", pod=~"$pod"'
E = f'target=~"$target", model=~"$model", {POD}'  # engine series
POD_VARIABLES = [variable("namespace", "Namespace", f"label_values({Engine.UP}, namespace)"),
                 variable("pod", "Pod", f'label_values({Engine.UP}{{namespace=~"$namespace"}}, pod)')]
NOT_COMPUTED = E + ', source!="local_compute"'  # prompt tokens the engine did not prefill itself

ANNOTATIONS = [
    prometheus_annotation(
        "Load-test stages", f'max by (run_id, stage) ({RUN_INFO}{{stage!~"idle|stopped"}})',
        "{{stage}}", "run {{run_id}}", "stage,run_id", "rgba(115, 191, 105, 0.6)"),
    prometheus_annotation(
        "Firing alerts", 'ALERTS{alertstate="firing", alertname!="Watchdog"}', "{{alertname}}",
        "{{severity}} on {{target}}",
        "alertname,severity", "rgba(242, 73, 92, 0.6)"),
]


# The SLO names `--slo` takes whose measure PromQL can compute from the client's histograms
# (metrics/slo.py): each latency at its mean, median and common percentiles.
SLO_LATENCIES = {"ttft": Client.TTFT, "tpot": Client.TPOT, "itl": Client.ITL, "e2el": Client.E2E}
SLO_STATS = {"mean": None, "median": 0.5, "p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}


def _objective(name: str) -> str:
    return f'on() group_left(slo) max by (slo) ({SLO_OBJECTIVE}{{slo="{name}"}})'


def slo_attainment() -> str:
    """Each SLO of the run as its measure over its objective, labelled `slo`: 1 is at the limit."""
    terms = [f"1000 * {mean(family, C) if q is None else quantile(q, family, C)} / {_objective(f'{m}_{stat}_ms')}"
             for m, family in SLO_LATENCIES.items() for stat, q in SLO_STATS.items()]
    terms.append(f"{rate(total(Client.FAILURES), C)} / {rate(total(Client.REQUESTS), C)} / "
                 f"{_objective('failure_ratio')}")
    terms.append(f"{rate(total(Client.REJECTED), C)} / {rate(total(Client.REQUESTS), C)} / "
                 f"{_objective('rejected_ratio')}")
    return "\n or ".join(f"({term})" for term in terms)


def _latency_pair(title: str, client: str, engine: str, description: str) -> Panel:
    return Panel(title, [
        (quantile(0.5, client, C), "client p50"),
        (quantile(0.99, client, C), "client p99"),
        (quantile(0.5, engine, E), "engine p50"),
        (quantile(0.99, engine, E), "engine p99"),
    ], "s", description)


def _engine_state(by: str = "") -> list[Panel]:
    """Queue, KV cache, prefix cache, speculation: shared by both dashboards (per target on the engine one)."""
    legend = "{{target}} " if by else ""
    group = f" by ({by})" if by else ""
    return [
        Panel("Running and waiting requests", [
            (f"sum{group} ({Engine.REQUESTS_RUNNING}{{{E}}})", legend + "running"),
            (f"sum{group} ({Engine.REQUESTS_WAITING}{{{E}}})", legend + "waiting"),
            (f"max{group} ({Engine.REQUESTS_WAITING_MAX}{{{E}}})", legend + "waiting, peak of the sidecar's window"),
        ], "short", "Requests in the engine's batch and in its queue; the peak comes from the sidecar's 1 s sampling."),
        Panel("Why requests wait", [
            (f"sum by ({', '.join([*([by] if by else []), 'reason'])}) ({Engine.REQUESTS_WAITING_BY_REASON}{{{E}}})",
             legend + "{{reason}}"),
        ], "short", "capacity: no room in the batch (--max-num-seqs), the step's token budget or the KV cache; "
                    "deferred: skipped by the scheduler (blocked, a LoRA limit, a KV transfer), which with "
                    "nothing generated is a stuck scheduler (vLLM 0.32 and later).", stack=True),
        Panel("KV cache usage", [
            (f"max{group} ({Engine.KV_CACHE_USAGE}{{{E}}})", legend + "usage"),
            (f"max{group} ({Engine.KV_CACHE_USAGE_MAX}{{{E}}})", legend + "peak of the sidecar's window"),
        ], "percentunit", "Share of KV cache blocks in use. Near 100 % with requests waiting means saturation.", max=1),
        Panel("Prefix-cache hit ratio", [
            (f"{rate(total(Engine.PREFIX_CACHE_HITS), E, by)} / {rate(total(Engine.PREFIX_CACHE_QUERIES), E, by)}",
             legend + "hits / queries"),
        ], "percentunit", "Prompt tokens found in the prefix cache, of those looked up.", max=1),
        Panel("Prompt tokens served from cache", [
            (f"{rate(total(Engine.PROMPT_TOKENS_BY_SOURCE), NOT_COMPUTED, by)} / "
             f"{rate(total(Engine.PROMPT_TOKENS_BY_SOURCE), E, by)}", legend + "share from cache"),
        ], "percentunit", "Of all prompt tokens, the share not prefilled here: found in the prefix cache or "
                          "transferred from another engine (vLLM 0.32 and later). The rest is compute.", max=1),
        Panel("Request phases, stacked (mean per request)", [
            (mean(Engine.QUEUE_TIME, E, by), legend + "queued"),
            (mean(Engine.PREFILL_TIME, E, by), legend + "prefill"),
            (mean(Engine.DECODE_TIME, E, by), legend + "decode"),
        ], "s", "The engine's mean request, phase on phase: waiting in the queue, the prefill, the decode.",
            stack=True),
        Panel("Speculative decoding: acceptance ratio", [
            (f"{rate(total(Engine.SPEC_ACCEPTED_TOKENS), E, by)} / "
             f"{rate(total(Engine.SPEC_DRAFT_TOKENS), E, by)}", legend + "accepted / draft tokens"),
        ], "percentunit", "Draft tokens the target model accepted. Empty when speculative decoding is off.", max=1),
        Panel("Speculative decoding: mean acceptance length", [
            (f"1 + {rate(total(Engine.SPEC_ACCEPTED_TOKENS), E, by)} / "
             f"{rate(total(Engine.SPEC_DRAFTS), E, by)}", legend + "tokens per step"),
        ], "short", "Tokens produced per decoding step of a sequence: 1 + accepted tokens per draft."),
        Panel("Preemptions", [
            (rate(total(Engine.PREEMPTIONS), E, by), legend + "preemptions/s"),
        ], "short", "Sequences evicted from the KV cache to be recomputed later: the cost of an overfull cache."),
    ]


def _batch_and_admission() -> list[Panel]:
    return [
        Panel("Batch size: tokens per engine step", [
            (f"sum by (le) (rate({Engine.ITERATION_TOKENS}_bucket{{{E}}}[$__rate_interval]))", "{{le}}"),
        ], "short", "Distribution over time of the tokens each engine iteration processed.", kind="heatmap",
            options={"calculate": False, "yAxis": {"unit": "short"}, "cellGap": 1, "showValue": "auto",
                     "color": {"mode": "scheme", "scheme": "Oranges", "fill": "dark-orange", "exponent": 0.5,
                               "steps": 64, "reverse": False},
                     "legend": {"show": True}, "tooltip": {"mode": "single", "yHistogram": False},
                     "exemplars": {"color": "rgba(255,0,255,0.7)"}}),
        Panel("Admission rejections", [
            (rate(total(Engine.ADMISSION_REJECTIONS), E, "reason"), "{{reason}}"),
        ], "reqps", "Requests the engine refused at a queue limit (vLLM versions that count them)."),
    ]


def _ranks() -> list[Panel]:
    """Each data-parallel rank of a server (`vllm serve --data-parallel-size N`: vLLM's `engine` label)
    on its own line: the server's totals elsewhere hide a rank that queues while another has room."""
    by, legend = "target, engine", "{{target}} rank {{engine}}"
    return [
        Panel("Running and waiting requests, each rank", [
            (f"sum by ({by}) ({Engine.REQUESTS_RUNNING}{{{E}}})", legend + " running"),
            (f"max by ({by}) ({Engine.REQUESTS_WAITING_MAX}{{{E}}})",
             legend + " waiting (peak of the sidecar's window)"),
        ], "short", "Each rank's batch and queue. vLLM sends a request to the rank with the fewest waiting plus "
                    "running, unless an X-data-parallel-rank header pins it: one rank queueing while another has "
                    "room is an imbalance (capacity names it, with each rank's peaks). One line each on a server of "
                    "one rank."),
        Panel("KV cache usage, each rank", [
            (f"max by ({by}) ({Engine.KV_CACHE_USAGE_MAX}{{{E}}})", legend),
        ], "percentunit", "Each rank's own KV cache (the ranks do not share one): a rank held by long contexts "
                          "fills first.", max=1),
        Panel("Spread between ranks (max - min)", [
            (_rank_spread(Engine.REQUESTS_WAITING), "{{target}} waiting"),
            (_rank_spread(Engine.REQUESTS_RUNNING), "{{target}} running"),
        ], "short", "How many more requests wait (or run) on a server's busiest rank than on its least busy: 0 "
                    "is even, and always 0 with one rank."),
    ]


def _rank_spread(name: str) -> str:
    """As the rules' target_model:<gauge>:rank_spread, computed here so the panel needs no rule."""
    per_rank = f"sum by (target, engine) ({name}{{{E}}})"
    return f"max by (target) ({per_rank}) - min by (target) ({per_rank})"


def overview() -> dict:
    where_time_goes = Panel("Where the time goes (mean per request)", [
        (f"{mean(Client.TTFT, C)} - {mean(Engine.TTFT, E)}",
         "outside the engine (client TTFT - engine TTFT)"),
        (mean(Engine.QUEUE_TIME, E), "queued"),
        (mean(Engine.PREFILL_TIME, E), "prefill"),
        (mean(Engine.DECODE_TIME, E), "decode"),
    ], "s", "Network, HTTP and tokenisation (the gap between the client's TTFT and the engine's), then the "
            "engine's queue, prefill and decode phases.", width=12)
    rows = [
        Row("Service-level objectives", [
            Panel("SLO attainment: measured / objective", [(slo_attainment(), "{{slo}}")], "percentunit",
                  "Each --slo of the run (its objective, exported by the load generator) as its measure over its "
                  "limit, over the rate interval: under 100 % it holds. Empty without --slo.", kind="stat", width=12,
                  thresholds=[(None, "green"), (0.8, "orange"), (1.0, "red")],
                  options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                           "colorMode": "background", "graphMode": "area", "textMode": "value_and_name",
                           "orientation": "auto", "justifyMode": "auto", "wideLayout": True,
                           "showPercentChange": False, "percentChangeColorMode": "standard"}),
            Panel("Per model", [
                (rate(total(Client.REQUESTS), C, "model"), "requests/s"),
                (quantile(0.99, Client.TTFT, C, "model"), "TTFT p99"),
                (quantile(0.99, Client.TPOT, C, "model"), "TPOT p99"),
                (f"{rate(total(Client.FAILURES), C, 'model')} / {rate(total(Client.REQUESTS), C, 'model')}",
                 "failed share"),
                (f"max by (model) ({Engine.KV_CACHE_USAGE}{{{E}}})", "KV cache"),
                (f"sum by (model) ({Engine.REQUESTS_WAITING}{{{E}}})", "waiting"),
            ], "short", "Each model (or LoRA adapter) the load reaches: its client figures beside its engine's.",
                kind="table", width=12),
        ]),
        Row("Client latency beside the engine's", [
            _latency_pair("Time to first token", Client.TTFT, Engine.TTFT,
                          "TTFT as the load generator measured it and as vLLM reports it."),
            Panel("Time per output token and inter-token latency", [
                (quantile(0.5, Client.TPOT, C), "client TPOT p50"),
                (quantile(0.99, Client.TPOT, C), "client TPOT p99"),
                (quantile(0.99, Client.ITL, C), "client ITL p99"),
                (quantile(0.5, Engine.ITL, E), "engine ITL p50"),
                (quantile(0.99, Engine.ITL, E), "engine ITL p99"),
            ], "s", "TPOT: one value per request, (E2E - TTFT) / (tokens - 1); ITL: every gap between chunks."),
            _latency_pair("End-to-end latency", Client.E2E, Engine.E2E,
                          "From sending the request to its last token."),
            where_time_goes,
            Panel("Users and requests in flight", [
                (f"sum({Client.USERS})", "Locust users"),
                (f"sum({Client.IN_FLIGHT}{{{C}}})", "in flight"),
            ], "short", "Locust users running and requests sent but not finished.", width=12),
        ]),
        Row("Throughput and failures", [
            Panel("Requests", [
                (rate(total(Client.REQUESTS), C), "client finished"),
                (rate(total(Client.FAILURES), C), "client failed"),
                (rate(total(Client.REJECTED), C), "client rejected"),
                (rate(total(Engine.REQUEST_SUCCESS), E), "engine finished"),
                (rate(total(Engine.ADMISSION_REJECTIONS), E), "engine rejected"),
            ], "reqps", "Requests finished per second, as the client and as the engine count them; rejected: "
                        "refused at the engine's admission limits (HTTP 503), apart from failures."),
            Panel("Tokens", [
                (rate(total(Client.GENERATION_TOKENS), C), "client generated"),
                (rate(total(Engine.GENERATION_TOKENS), E), "engine generated"),
                (rate(total(Client.PROMPT_TOKENS), C), "client prompt"),
                (rate(total(Engine.PROMPT_TOKENS), E), "engine prompt"),
            ], "short", "Tokens per second, as the client's usage counts them and as the engine does: output "
                        "tokens, and prompt tokens (all that embeddings and rerank requests have)."),
            Panel("Failures by reason", [
                (rate(total(Client.FAILURES), C, "reason"), "{{reason}}"),
            ], "reqps", "Failed requests per second: http_<status>, connection, timeout, stream_cut, "
                        "malformed_chunk, stream_error, empty_completion, malformed_answer."),
        ]),
        Row("Engine state", [*_engine_state(), *_batch_and_admission()]),
        Row("Agents: sessions, tools, reasoning, cache", [
            Panel("Time to first token by session turn (p90)", [
                (quantile(0.9, Client.TTFT, C, "turn"), "turn {{turn}}"),
            ], "s", "Sessions (--dataset sessions) label each request with its turn: 1, 2, 3-4, 5-8, 9+. A long "
                    "history that the prefix cache keeps costs little; one it lost is prefilled again. Requests "
                    "outside a session have no turn."),
            Panel("Prompt found in the prefix cache", [
                (mean(Client.CACHED_RATIO, C), "client: cached share of each prompt (usage)"),
                (f"{rate(total(Engine.PREFIX_CACHE_HITS), E)} / {rate(total(Engine.PREFIX_CACHE_QUERIES), E)}",
                 "engine: hits / queries"),
            ], "percentunit", "What each request's usage says was cached (vLLM with --enable-prompt-tokens-details) "
                              "beside the engine's own prefix-cache hit ratio.", max=1),
            Panel("Time to first answer token", [
                (quantile(0.5, Client.TTFA, C), "answer p50"),
                (quantile(0.99, Client.TTFA, C), "answer p99"),
                (quantile(0.99, Client.TTFT, C), "first token p99"),
            ], "s", "To the first answer output (text or tool-call arguments), after a reasoning model's "
                    "thoughts: what a user waits for. The same as TTFT for a model that does not reason first."),
            Panel("Tool calls", [
                (rate(total(Client.TOOL_CALLS), C), "tool calls/s"),
                (f"{rate(total(Client.TOOL_CALLS), C)} / {rate(total(Client.REQUESTS), C)}", "per request"),
            ], "short", "Tool calls the model made in successful requests (their streamed arguments are output)."),
        ]),
        Row("Load generator", [
            Panel("Event-loop lag of each Locust process (p99)", [
                (quantile(0.99, Client.EVENT_LOOP_LAG, 'worker=~".*"', "worker"), "{{worker}}"),
            ], "s", "How late each process wakes a greenlet: its own delay on every request it measures. "
                    "Tens of milliseconds mean a saturated load generator: add --processes.", width=12),
            Panel("CPU of each Locust process", [
                (rate(total(Client.CPU), 'worker=~".*"', "worker"), "{{worker}}"),
            ], "short", "Cores used; a process runs its users on one, so near 1 it is the bottleneck.", width=12),
        ]),
        Row("GPU (NVIDIA DCGM exporter)", [
            Panel("GPU utilisation", [("avg by (Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL)", "{{Hostname}} GPU {{gpu}}")],
                  "percent", "Empty without NVIDIA's DCGM exporter (docker-compose.yml runs one)."),
            Panel("GPU memory used", [("max by (Hostname, gpu) (DCGM_FI_DEV_FB_USED)", "{{Hostname}} GPU {{gpu}}")],
                  "decmbytes", "Frame buffer in use: vLLM reserves most of it for the KV cache at start."),
            Panel("GPU power", [("max by (Hostname, gpu) (DCGM_FI_DEV_POWER_USAGE)", "{{Hostname}} GPU {{gpu}}")],
                  "watt", "Board power draw."),
        ]),
    ]
    variables = [
        variable("model", "Model", f"label_values({total(Client.REQUESTS)}, model)"),
        variable("scenario", "Scenario", f'label_values({total(Client.REQUESTS)}{{model=~"$model"}}, scenario)'),
        *POD_VARIABLES,
        variable("target", "Engine", f'label_values({Engine.UP}{{{POD}}}, target)'),
    ]
    return dashboard("loadwatch-overview", "loadwatch: load test overview",
                     "Client latency from the load generator beside vLLM's engine state, on one time axis.",
                     rows, variables, ANNOTATIONS)


def engine() -> dict:
    by = "target"
    rows = [
        Row("Health", [
            Panel("KV cache configuration", [
                (f"max by (target, model) ({Engine.KV_CACHE_BLOCKS}{{{E}}})", "blocks"),
                (f"max by (target, model) ({Engine.KV_CACHE_BLOCK_SIZE}{{{E}}})", "tokens a block"),
                (f"max by (target, model) ({Engine.KV_CACHE_SIZE}{{{E}}})", "tokens in all"),
                (f"max by (target, model) ({Engine.KV_CACHE_MAX_CONCURRENCY}{{{E}}})", "requests at full length"),
                (f"max by (target, model, prefix_caching, cache_dtype) ({Engine.CACHE_CONFIG_INFO}{{{E}}})", "info"),
            ], "short", "What each engine's KV cache holds, as vLLM states it (vllm:cache_config_info): the room a "
                        "capacity verdict is counted in.", kind="table", width=24, height=6),
            Panel("Sidecar sees the engine",
                  [(f'max by (target) ({Engine.UP}{{target=~"$target", {POD}}})', "{{target}}")],
                  "short", "1 when the sidecar's last sample of the engine's /metrics succeeded.", max=1),
            Panel("Sidecar sample duration", [
                (f'max by (target) ({Engine.SCRAPE_DURATION}{{target=~"$target", {POD}}})', "{{target}}")],
                  "s", "How long reading the engine's /metrics took: slow under heavy load."),
            Panel("Finished requests by reason", [
                (rate(total(Engine.REQUEST_SUCCESS), E, "target, finished_reason"),
                 "{{target}} {{finished_reason}}")], "reqps", "stop, length, abort, error: why requests ended."),
        ]),
        Row("Latency", [
            Panel("Time to first token", [
                (quantile(0.5, Engine.TTFT, E, by), "{{target}} p50"),
                (quantile(0.99, Engine.TTFT, E, by), "{{target}} p99"),
            ], "s", "vLLM's own TTFT histogram."),
            Panel("Inter-token latency", [
                (quantile(0.5, Engine.ITL, E, by), "{{target}} p50"),
                (quantile(0.99, Engine.ITL, E, by), "{{target}} p99"),
            ], "s", "vLLM's own ITL histogram."),
            Panel("Request phases (p99)", [
                (quantile(0.99, Engine.QUEUE_TIME, E, by), "{{target}} queued"),
                (quantile(0.99, Engine.PREFILL_TIME, E, by), "{{target}} prefill"),
                (quantile(0.99, Engine.DECODE_TIME, E, by), "{{target}} decode"),
                (quantile(0.99, Engine.E2E, E, by), "{{target}} end to end"),
            ], "s", "Queue, prefill and decode times of requests, and their end-to-end latency."),
        ]),
        Row("Throughput", [
            Panel("Tokens", [
                (rate(total(Engine.PROMPT_TOKENS), E, by), "{{target}} prompt"),
                (rate(total(Engine.GENERATION_TOKENS), E, by), "{{target}} generated"),
            ], "short", "Prompt and generated tokens per second.", width=12),
            Panel("Accepted draft tokens by position", [
                (rate(total(Engine.SPEC_ACCEPTED_PER_POSITION), E, "target, position"),
                 "{{target}} position {{position}}"),
            ], "short", "Accepted tokens per second at each draft position: where speculation stops paying.",
                width=12),
        ]),
        Row("State", [*_engine_state(by), *_batch_and_admission()]),
        Row("Data-parallel ranks", _ranks()),
    ]
    variables = [
        *POD_VARIABLES,
        variable("target", "Engine", f'label_values({Engine.UP}{{{POD}}}, target)'),
        variable("model", "Model", f'label_values({Engine.REQUESTS_RUNNING}{{target=~"$target"}}, model)'),
    ]
    return dashboard("loadwatch-engine", "loadwatch: vLLM engines",
                     "Every vLLM the sidecar watches, by target: health, latency, throughput and state.",
                     rows, variables, ANNOTATIONS[1:])


# The router's series that vllm-router makes only once it has something to count: its prefix decisions
# under cache_aware (smg's under cache_aware and prefix_hash), running requests under the load-aware
# policies, retries once a try failed.
ONLY_WHEN = {Router.PREFIX_DECISIONS: "the policy is prefix-aware (cache_aware; smg's prefix_hash)",
             Router.REPLICA_RUNNING: "the policy is load-aware (cache_aware, power_of_two)",
             Router.RETRIES: "a replica failed a try"}
R = 'router=~"$router"'


def _share(selector: str) -> str:
    """Each replica's share of what the fleet served over the rate interval."""
    served = f"rate({total(Engine.REQUEST_SUCCESS)}{{{selector}}}[{RATE}])"
    return f"sum by (target) ({served})\n/ ignoring (target) group_left ()\nsum ({served})"


def _spread(name: str) -> str:
    per_replica = f"sum by (target) ({name}{{{E}}})"
    return f"max ({per_replica}) - min ({per_replica})"


def fleet() -> dict:
    by = "target"
    rows = [
        Row("Replicas side by side", [
            Panel("Requests served", [(rate(total(Engine.REQUEST_SUCCESS), E, by), "{{target}}")], "reqps",
                  "Requests each replica finished per second, as the replica counts them."),
            Panel("Share of the fleet's requests", [(_share(E), "{{target}}")], "percentunit",
                  "Each replica's share of what the fleet served: 1 / N each is an even split.", max=1),
            Panel("Client TTFT by replica (p50, p99)", [
                (quantile(0.5, Client.TTFT, C, "replica"), "{{replica}} p50"),
                (quantile(0.99, Client.TTFT, C, "replica"), "{{replica}} p99"),
            ], "s", "The load generator's time to first token of the requests each replica served (their answers "
                    "name it)."),
            Panel("Client TPOT by replica (p50, p99)", [
                (quantile(0.5, Client.TPOT, C, "replica"), "{{replica}} p50"),
                (quantile(0.99, Client.TPOT, C, "replica"), "{{replica}} p99"),
            ], "s", "The load generator's time per output token of the requests each replica served."),
            *_engine_state(by)[:4],
        ]),
        Row("Spread", [
            Panel("Queue and batch spread (max - min across replicas)", [
                (_spread(Engine.REQUESTS_WAITING), "waiting"),
                (_spread(Engine.REQUESTS_RUNNING), "running"),
            ], "short", "How many more requests wait (or run) on the busiest replica than on the least busy: 0 is "
                        "even. One replica queueing while another has room is VLLMFleetImbalanced."),
            Panel("Busiest replica's share over an even share", [
                (f"max ({_share(E)}) * count (sum by (target) ({Engine.UP}{{{E}}} == 1))", "busiest / even"),
            ], "short", "1 is an even split; 2 means the busiest replica served twice its share."),
            Panel("Fleet-wide prefix-cache hit ratio", [
                (f"{rate(total(Engine.PREFIX_CACHE_HITS), E)} / {rate(total(Engine.PREFIX_CACHE_QUERIES), E)}",
                 "fleet"),
            ], "percentunit", "All replicas' prefix-cache hits over their queries: routing that spreads a prefix "
                              "over replicas prefills it once on each.", max=1),
        ]),
        Row("Router", [
            Panel("Router and the replicas it sees", [
                (f"max by (router) ({Router.UP}{{{R}}})", "{{router}} up"),
                (f"max by (replica) ({Router.REPLICA_HEALTHY}{{{R}}})", "{{replica}} healthy"),
            ], "short", "1 when the sidecar reads the router; each replica as the router's health checks see it.",
                max=1),
            Panel("Circuit breaker by replica", [
                (f"max by (replica) ({Router.REPLICA_CIRCUIT_BREAKER}{{{R}}})", "{{replica}}"),
            ], "short", "0 closed (sending), 1 open (not sending), 2 half-open (trying again)."),
            Panel("Requests sent to each replica", [
                (rate(total(Router.REPLICA_REQUESTS), R, "replica"), "{{replica}}"),
                (rate(total(Router.RETRIES), R), "retried"),
            ], "reqps", "The router's choices, failed tries included; retried: sent again to another replica."),
            Panel("Policy decisions", [
                (rate(total(Router.POLICY_DECISIONS), R, "policy, replica"), "{{policy}} {{replica}}"),
            ], "reqps", "Which replica the routing policy chose, per second."),
            Panel("Prefix-aware routing", [
                (rate(total(Router.PREFIX_DECISIONS), R, "policy, outcome"), "{{policy}} {{outcome}}"),
            ], "reqps", "Prefix-aware policies only. vllm-router's cache_aware: prefix_hit, a prompt prefix the "
                        "router had seen on a replica; prefix_miss; load_imbalance, sent by load instead; "
                        "missing_tokens, it could not read the prompt's tokens (then it routes by load alone). "
                        "smg's cache_aware matches the prompt's text: tree_match; spill, sent by load instead; "
                        "expected_wait_fallback, no match. smg's prefix_hash: ring_hit, load_balance_walk, ..."),
            Panel("Running requests as the router counts them", [
                (f"sum by (replica) ({Router.REPLICA_RUNNING}{{{R}}})", "{{replica}}"),
            ], "short", "Load-aware policies only: the router's own count, beside the replica's."),
        ]),
    ]
    variables = [
        *POD_VARIABLES,
        variable("target", "Replica", f'label_values({Engine.UP}{{{POD}}}, target)'),
        variable("model", "Model", f'label_values({Engine.REQUESTS_RUNNING}{{target=~"$target"}}, model)'),
        variable("scenario", "Scenario", f'label_values({RUN_INFO}, scenario)'),
        variable("router", "Router", f"label_values({Router.UP}, router)"),
    ]
    return dashboard("loadwatch-fleet", "loadwatch: vLLM fleet",
                     "Replicas behind a router side by side: what each served, how evenly, what each was doing, "
                     "and the router's own view.", rows, variables, ANNOTATIONS)


DASHBOARDS = {"overview.json": overview, "engine.json": engine, "fleet.json": fleet}
