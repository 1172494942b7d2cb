"""loadwatch's two dashboards: the run overview (client beside engine) and the engine fleet."""

from __future__ import annotations

from loadwatch.grafana.panels import (
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
E = 'target=~"$target", model=~"$model"'  # engine series
CLIENT = "loadwatch_client_"
ENGINE = "loadwatch_engine_"

ANNOTATIONS = [
    prometheus_annotation(
        "Load-test stages", 'max by (run_id, stage) (loadwatch_run_info{stage!~"idle|stopped"})',
        "{{stage}}", "run {{run_id}}", "stage,run_id", "rgba(115, 191, 105, 0.6)"),
    prometheus_annotation(
        "Firing alerts", 'ALERTS{alertstate="firing"}', "{{alertname}}", "{{severity}} on {{target}}",
        "alertname,severity", "rgba(242, 73, 92, 0.6)"),
]


def _latency_pair(title: str, client: str, engine: str, description: str) -> Panel:
    return Panel(title, [
        (quantile(0.5, CLIENT + client, C), "client p50"),
        (quantile(0.99, CLIENT + client, C), "client p99"),
        (quantile(0.5, ENGINE + engine, E), "engine p50"),
        (quantile(0.99, ENGINE + engine, E), "engine p99"),
    ], "s", description)


def _engine_state(by: str = "") -> list[Panel]:
    """Queue, KV cache, prefix cache, speculation: shared by both dashboards (per target on the engine one)."""
    legend = "{{target}} " if by else ""
    group = f" by ({by})" if by else ""
    return [
        Panel("Running and waiting requests", [
            (f"sum{group} ({ENGINE}requests_running{{{E}}})", legend + "running"),
            (f"sum{group} ({ENGINE}requests_waiting{{{E}}})", legend + "waiting"),
            (f"max{group} ({ENGINE}requests_waiting_max{{{E}}})", legend + "waiting, peak of the sidecar's window"),
        ], "short", "Requests in the engine's batch and in its queue; the peak comes from the sidecar's 1 s sampling."),
        Panel("KV cache usage", [
            (f"max{group} ({ENGINE}kv_cache_usage_ratio{{{E}}})", legend + "usage"),
            (f"max{group} ({ENGINE}kv_cache_usage_ratio_max{{{E}}})", legend + "peak of the sidecar's window"),
        ], "percentunit", "Share of KV cache blocks in use. Near 100 % with requests waiting means saturation.", max=1),
        Panel("Prefix-cache hit ratio", [
            (f"{rate(ENGINE + 'prefix_cache_hits_total', E, by)} / {rate(ENGINE + 'prefix_cache_queries_total', E, by)}",
             legend + "hits / queries"),
        ], "percentunit", "Prompt tokens found in the prefix cache, of those looked up.", max=1),
        Panel("Speculative decoding: acceptance ratio", [
            (f"{rate(ENGINE + 'spec_decode_accepted_tokens_total', E, by)} / "
             f"{rate(ENGINE + 'spec_decode_draft_tokens_total', E, by)}", legend + "accepted / draft tokens"),
        ], "percentunit", "Draft tokens the target model accepted. Empty when speculative decoding is off.", max=1),
        Panel("Speculative decoding: mean acceptance length", [
            (f"1 + {rate(ENGINE + 'spec_decode_accepted_tokens_total', E, by)} / "
             f"{rate(ENGINE + 'spec_decode_drafts_total', E, by)}", legend + "tokens per step"),
        ], "short", "Tokens produced per decoding step of a sequence: 1 + accepted tokens per draft."),
        Panel("Preemptions", [
            (rate(ENGINE + "preemptions_total", E, by), legend + "preemptions/s"),
        ], "short", "Sequences evicted from the KV cache to be recomputed later: the cost of an overfull cache."),
    ]


def _batch_and_admission() -> list[Panel]:
    return [
        Panel("Batch size: tokens per engine step", [
            (f"sum by (le) (rate({ENGINE}iteration_tokens_bucket{{{E}}}[$__rate_interval]))", "{{le}}"),
        ], "short", "Distribution over time of the tokens each engine iteration processed.", kind="heatmap",
            options={"calculate": False, "yAxis": {"unit": "short"}, "cellGap": 1, "color": {"scheme": "Oranges"}}),
        Panel("Admission rejections", [
            (rate(ENGINE + "admission_rejections_total", E, "reason"), "{{reason}}"),
        ], "reqps", "Requests the engine refused at a queue limit (vLLM versions that count them)."),
    ]


def overview() -> dict:
    where_time_goes = Panel("Where the time goes (mean per request)", [
        (f"{mean(CLIENT + 'time_to_first_token_seconds', C)} - {mean(ENGINE + 'time_to_first_token_seconds', E)}",
         "outside the engine (client TTFT - engine TTFT)"),
        (mean(ENGINE + "request_queue_time_seconds", E), "queued"),
        (mean(ENGINE + "request_prefill_time_seconds", E), "prefill"),
        (mean(ENGINE + "request_decode_time_seconds", E), "decode"),
    ], "s", "Network, HTTP and tokenisation (the gap between the client's TTFT and the engine's), then the "
            "engine's queue, prefill and decode phases.", width=12)
    rows = [
        Row("Client latency beside the engine's", [
            _latency_pair("Time to first token", "time_to_first_token_seconds", "time_to_first_token_seconds",
                          "TTFT as the load generator measured it and as vLLM reports it."),
            Panel("Time per output token and inter-token latency", [
                (quantile(0.5, CLIENT + "time_per_output_token_seconds", C), "client TPOT p50"),
                (quantile(0.99, CLIENT + "time_per_output_token_seconds", C), "client TPOT p99"),
                (quantile(0.99, CLIENT + "inter_token_latency_seconds", C), "client ITL p99"),
                (quantile(0.5, ENGINE + "inter_token_latency_seconds", E), "engine ITL p50"),
                (quantile(0.99, ENGINE + "inter_token_latency_seconds", E), "engine ITL p99"),
            ], "s", "TPOT: one value per request, (E2E - TTFT) / (tokens - 1); ITL: every gap between chunks."),
            _latency_pair("End-to-end latency", "e2e_request_latency_seconds", "e2e_request_latency_seconds",
                          "From sending the request to its last token."),
            where_time_goes,
            Panel("Users and requests in flight", [
                ("sum(loadwatch_client_users)", "Locust users"),
                (f"sum({CLIENT}requests_in_flight{{{C}}})", "in flight"),
            ], "short", "Locust users running and requests sent but not finished.", width=12),
        ]),
        Row("Throughput and failures", [
            Panel("Requests", [
                (rate(CLIENT + "requests_total", C), "client finished"),
                (rate(CLIENT + "request_failures_total", C), "client failed"),
                (rate(ENGINE + "request_success_total", E), "engine finished"),
            ], "reqps", "Requests finished per second, as the client and as the engine count them."),
            Panel("Tokens", [
                (rate(CLIENT + "generation_tokens_total", C), "client generated"),
                (rate(ENGINE + "generation_tokens_total", E), "engine generated"),
                (rate(ENGINE + "prompt_tokens_total", E), "engine prompt"),
            ], "short", "Tokens per second: output tokens as the client's usage counts them, and the engine's."),
            Panel("Failures by reason", [
                (rate(CLIENT + "request_failures_total", C, "reason"), "{{reason}}"),
            ], "reqps", "Failed requests per second: http_<status>, connection, timeout, stream_cut, "
                        "malformed_chunk, stream_error, empty_completion."),
        ]),
        Row("Engine state", [*_engine_state(), *_batch_and_admission()]),
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
        variable("model", "Model", "label_values(loadwatch_client_requests_total, model)"),
        variable("scenario", "Scenario", 'label_values(loadwatch_client_requests_total{model=~"$model"}, scenario)'),
        variable("target", "Engine", "label_values(loadwatch_engine_up, target)"),
    ]
    return dashboard("loadwatch-overview", "loadwatch: load test overview",
                     "Client latency from the load generator beside vLLM's engine state, on one time axis.",
                     rows, variables, ANNOTATIONS)


def engine() -> dict:
    by = "target"
    rows = [
        Row("Health", [
            Panel("Sidecar sees the engine", [(f'max by (target) ({ENGINE}up{{target=~"$target"}})', "{{target}}")],
                  "short", "1 when the sidecar's last sample of the engine's /metrics succeeded.", max=1),
            Panel("Sidecar sample duration", [
                (f'max by (target) ({ENGINE}scrape_duration_seconds{{target=~"$target"}})', "{{target}}")],
                  "s", "How long reading the engine's /metrics took: slow under heavy load."),
            Panel("Finished requests by reason", [
                (rate(ENGINE + "request_success_total", E, "target, finished_reason"),
                 "{{target}} {{finished_reason}}")], "reqps", "stop, length, abort, error: why requests ended."),
        ]),
        Row("Latency", [
            Panel("Time to first token", [
                (quantile(0.5, ENGINE + "time_to_first_token_seconds", E, by), "{{target}} p50"),
                (quantile(0.99, ENGINE + "time_to_first_token_seconds", E, by), "{{target}} p99"),
            ], "s", "vLLM's own TTFT histogram."),
            Panel("Inter-token latency", [
                (quantile(0.5, ENGINE + "inter_token_latency_seconds", E, by), "{{target}} p50"),
                (quantile(0.99, ENGINE + "inter_token_latency_seconds", E, by), "{{target}} p99"),
            ], "s", "vLLM's own ITL histogram."),
            Panel("Request phases (p99)", [
                (quantile(0.99, ENGINE + "request_queue_time_seconds", E, by), "{{target}} queued"),
                (quantile(0.99, ENGINE + "request_prefill_time_seconds", E, by), "{{target}} prefill"),
                (quantile(0.99, ENGINE + "request_decode_time_seconds", E, by), "{{target}} decode"),
                (quantile(0.99, ENGINE + "e2e_request_latency_seconds", E, by), "{{target}} end to end"),
            ], "s", "Queue, prefill and decode times of requests, and their end-to-end latency."),
        ]),
        Row("Throughput", [
            Panel("Tokens", [
                (rate(ENGINE + "prompt_tokens_total", E, by), "{{target}} prompt"),
                (rate(ENGINE + "generation_tokens_total", E, by), "{{target}} generated"),
            ], "short", "Prompt and generated tokens per second.", width=12),
            Panel("Accepted draft tokens by position", [
                (rate(ENGINE + "spec_decode_accepted_tokens_per_position_total", E, "target, position"),
                 "{{target}} position {{position}}"),
            ], "short", "Accepted tokens per second at each draft position: where speculation stops paying.",
                width=12),
        ]),
        Row("State", [*_engine_state(by), *_batch_and_admission()]),
    ]
    variables = [
        variable("target", "Engine", "label_values(loadwatch_engine_up, target)"),
        variable("model", "Model", 'label_values(loadwatch_engine_requests_running{target=~"$target"}, model)'),
    ]
    return dashboard("loadwatch-engine", "loadwatch: vLLM engines",
                     "Every vLLM the sidecar watches, by target: health, latency, throughput and state.",
                     rows, variables, ANNOTATIONS[1:])


DASHBOARDS = {"overview.json": overview, "engine.json": engine}
