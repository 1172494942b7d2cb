"""report.json as Markdown: what a person reads after a run."""

from __future__ import annotations

from loadwatch.metrics.results import latency_key
from loadwatch.metrics.summary import process_name
from loadwatch.report.engine_at import EngineState


def ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} ms"


def share(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "< 0.1 %" if 0 < value < 0.001 else f"{value * 100:.1f} %"


def number(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def where_the_time_goes(c: dict, e: dict) -> list[str]:
    """The client's TTFT split at the response headers, beside the engine's own timings."""

    def row(name: str, metric: str) -> list[str]:
        return [name, *(ms(c.get(latency_key(metric, stat))) for stat in ("mean", "median", "p99"))]

    exact = bool(e.get("engine_ttft_exact"))

    def engine_row(name: str, key: str) -> list[str]:
        return [name, *(ms(e.get(f"engine_{stat}_{key}_ms")) if exact or stat == "mean" or
                        (stat == "p99" and key == "ttft") else "" for stat in ("mean", "median", "p99"))]

    lines = table(["time to first token", "mean", "median", "p99"], [
        row("client: whole TTFT", "ttft"),
        row("client: to the response headers", "headers"),
        row("client: headers to first token", "ttft_after_headers"),
        engine_row("engine: TTFT (queued + prefill)", "ttft"),
        engine_row("engine: queued", "queue"),
        engine_row("engine: prefill", "prefill"),
    ])
    lines += ["", "The engine's rows come from each request's own account, over the same requests as the "
                  "client's (vLLM's --enable-per-request-metrics)." if exact else
                  "The engine's rows come from vLLM's histograms over the window (means, and the TTFT's p99 "
                  "interpolated in its buckets): their requests are not exactly the client's."]
    client, engine = c.get(latency_key("ttft", "mean")), e.get("engine_mean_ttft_ms")
    before = c.get(latency_key("headers", "mean"))
    if client is not None and engine is not None:
        outside = client - engine
        text = f"Of the client's mean TTFT, {outside:.0f} ms ({outside / client:.0%}) is not in the engine's TTFT."
        after = c.get(latency_key("ttft_after_headers", "median"))
        if before is not None and after is not None and after < 1.0:
            text += (" The server sent its response headers with the first token, so the time before them "
                     "(request handling, chat template, tokenization) cannot be told apart from the rest.")
        elif before is not None:
            rest = outside - before
            text += (f" {before:.0f} ms of the client's TTFT passes before the response headers: sending the "
                     "request, the server parsing it, applying the chat template and tokenizing (vLLM answers "
                     "with headers before it generates).")
            text += (f" The remaining {rest:.0f} ms are after the headers and outside the engine's TTFT: the "
                     "first token's way back through the API server and the network, and the client reading it; "
                     "loadwatch cannot split them further." if rest > 0 else
                     " The engine's TTFT covers the rest.")
        lines += ["", text]
    lines += ["", f"Of the engine's end-to-end time (vLLM's histograms), requests spent "
                  f"{share(e.get('queue_time_share'))} queued, {share(e.get('prefill_time_share'))} in prefill and "
                  f"{share(e.get('decode_time_share'))} in decode."]
    return lines


def request_by_request(split: dict, explain: str) -> list[str]:
    """Each request's TTFT split by the engine's own account of it: exact percentiles of each part."""
    return [
        "## Request by request", "",
        f"{split['joined']} of the {split['measured']} measured requests carry the engine's own account, joined "
        "by their X-Request-Id (docs/guides/slow-requests.md); over them, each part of the TTFT, exact "
        "(vLLM's histograms interpolate a p99 inside buckets up to a second wide). The "
        "percentiles of the parts do not add up to the TTFT's: each is over its own order of the requests.", "",
        *table(["part of the TTFT", "mean", "median", "p99"],
               [[p["name"], ms(p["mean_ms"]), ms(p["median_ms"]), ms(p["p99_ms"])] for p in split["parts"]]),
        "", *bands(split["bands"], explain),
    ]


def bands(rows: list[dict], explain: str) -> list[str]:
    """The median request and the slowest 1 % by TTFT: the mean of each part, the part that
    dominates, and the engine's state while they ran. `explain`: the run's results file or folder,
    as `loadwatch explain` takes it."""
    return [
        "The median requests (TTFT between its 45th and 55th percentiles) and the slowest 1 %: the mean of each "
        "part over them, the part that dominates, and the engine while they ran (the mean of the peaks seen "
        f"over each request's life, from the run's Prometheus). `loadwatch explain {explain} --slowest 5` tells "
        "the story of each of the slowest.", "",
        *table(["band", "requests", "mean TTFT", "to headers", "queued", "prefill", "the rest", "dominant part",
                "engine then"],
               [[b["band"], str(b["requests"]), ms(b["mean_ttft_ms"]),
                 *(ms(b["parts_ms"][p]) for p in ("headers_s", "engine_queue_s", "engine_prefill_s", "ttft_rest_s")),
                 f"{b['dominant_name']}, {share(b['dominant_share'])}",
                 engine_words(b.get("engine"))] for b in rows]),
    ]


def engine_words(engine: dict | None) -> str:
    if not engine:
        return "n/a"
    return EngineState(**engine).words()


def load_generator_words(load_generator: dict) -> list[str]:
    """How busy each Locust process was, and how an open loop's schedule was kept."""
    lines = []
    if busy := load_generator.get("busy"):
        used = (f"{share(next(iter(busy.values())))} of a core" if len(busy) == 1
                else ", ".join(f"{share(cpu)} ({process_name(name)})" for name, cpu in busy.items()))
        lines.append(f"Load generator: each Locust process used {used} over the run; near 100 %, a process delays "
                     "its own measurements.")
    if arrivals := load_generator.get("arrivals"):
        asked = f"asked {arrivals['requested_rate']:g} requests/s, " if arrivals["requested_rate"] else ""
        lag = arrivals["lag_ms"]
        words = (f"Open loop: {asked}drawn {number(arrivals['scheduled_rate'])}/s, sent "
                 f"{number(arrivals['achieved_rate'])}/s; arrivals went out {ms(lag.get('median'))} late at the "
                 f"median, {ms(lag.get('p99'))} at p99.")
        if arrivals["dropped"]:
            words += f" {arrivals['dropped']} were dropped at --max-concurrency."
        lines.append(words)
    return lines


def lora_rows(e: dict) -> list[list[str]]:
    """An engine with LoRA: the most adapters it ran at once and how many one batch holds (vLLM 0.32
    lists the running adapters as the waiting ones too, so those are not shown)."""
    if e.get("lora_max_adapters") is None:
        return []
    return [["LoRA adapters running, peak", number(e.get("lora_adapters_running_peak"), 0)],
            ["LoRA adapters one batch holds (--max-loras)", number(e["lora_max_adapters"], 0)]]


MODEL_HEADER = ["model or adapter", "requests", "failed", "output tok/s", "TTFT median", "TTFT p99", "TPOT median",
                "TPOT p99"]


def model_cells(models: list[dict]) -> list[list[str]]:
    """A traffic split's row per model (LoRA adapter): its requests and its own TTFT and TPOT."""
    return [[m["model"], str(m["completed"]), str(m["failed"]), number(m["output_throughput"]),
             *(ms(m[latency_key(metric, stat)]) for metric in ("ttft", "tpot") for stat in ("median", "p99"))]
            for m in models]


def replica_rows(fleet: dict) -> list[str]:
    """A fleet's replicas side by side: what each served and failed (the client's figures of the requests
    its answers named) and its engine's peaks over the run; then the spread and the replicas lost."""
    lines = table(["replica", "requests", "failed", "share", "TTFT median", "TTFT p99", "TPOT median",
                   "running, peak", "waiting, peak", "KV cache, peak"],
                  [[r["replica"], str(r["completed"]), str(r.get("failed", 0)), share(r["share"]),
                    ms(r[latency_key("ttft", "median")]), ms(r[latency_key("ttft", "p99")]),
                    ms(r[latency_key("tpot", "median")]),
                    number(r["running_peak"], 0), number(r["waiting_peak"], 0), share(r["kv_cache_peak"])]
                   for r in fleet["replicas"]])
    if fleet["busiest_share_ratio"] is not None:
        lines += ["", f"The busiest replica served {number(fleet['busiest_share_ratio'])} times an even share."]
    if fleet.get("waiting_spread"):
        lines += ["", f"Queue spread: one replica's waiting peak was {number(fleet['waiting_spread'], 0)} above "
                      "another's (max - min across replicas): the routing, not the fleet's size, made requests wait."]
    if fleet["unattributed"]:
        lines += ["", f"{fleet['unattributed']} successful requests named no replica (see docs/guides/fleet.md)."]
    for line in fleet["lost"]:
        lines += ["", line + "."]
    return lines


def scaling_rows(scaling: dict) -> list[str]:
    """The fleet's changes (--scale-at) and how long after each the SLOs held again."""
    def again(event: dict) -> str:
        if event["error"]:
            return "not scaled: " + event["error"]
        if not scaling["judged"]:
            return "n/a (no --slo, or no records)"
        return ("not before the next change or the end" if event["slo_held_again_s"] is None
                else f"{event['slo_held_again_s']:g}")
    rows = [[f"{e['at_s']:g}", str(e["replicas"]), "n/a" if e["ready_s"] is None else f"{e['ready_s']:.1f}",
             again(e)] for e in scaling["events"]]
    return [*table(["at (s into the load)", "replicas", "listed by the router after (s)", "SLOs held again after (s)"],
                   rows), "", f"The SLOs are judged over windows of {scaling['window_s']:g} s of finished requests; "
            "they hold again at the first window from which every later one holds, until the next change."]


def render(report: dict) -> str:
    c, e, w = report["client"], report["engine"], report["window"]
    lines = [
        f"# loadwatch report: run {report['run_id']}",
        "",
        f"Target {report['target'] or 'n/a'}, {w['start_utc']} to {w['end_utc']} (UTC).",
        "",
        "## Client",
        "",
        *table(["requests", "failed", "rejected", "req/s", "output tok/s", "total tok/s", "goodput req/s"], [[
            str(c["completed"]), str(c["failed"]), str(c.get("rejected") or 0), number(c["request_throughput"]),
            number(c["output_throughput"]),
            number(c["total_token_throughput"]), number(c["request_goodput"])]]),
        "",
        *([f"At ${c['price_per_hour']:g} an hour: ${number(c['cost_per_million_output_tokens'])} per 1M output "
           f"tokens, ${number(c['cost_per_million_total_tokens'])} per 1M total tokens.", ""]
          if c.get("price_per_hour") else []),
        *table(["latency", "mean", "median", "p99"], [
            [name.upper(), *(ms(c[latency_key(name, stat)]) for stat in ("mean", "median", "p99"))]
            for name in ("ttft", "tpot", "itl", "e2el")]),
    ]
    if report.get("client_source"):
        lines += ["", f"Client figures {report['client_source']}."]
    for words in load_generator_words(report.get("load_generator") or {}):
        lines += ["", words]
    if c["failures"]:
        lines += ["", "Failures: " + ", ".join(f"{reason} {n}" for reason, n in c["failures"].items()) + "."]
    if report.get("rejections") and report["rejections"] not in report["notes"]:
        lines += ["", report["rejections"]]
    if report.get("engine_missing"):
        lines += ["", report["engine_missing"]]
    if e:
        lines += [
            "", "## Engine", "",
            *table(["figure", "value"], [
                ["KV cache usage, peak", share(e["kv_cache_usage_peak"])],
                ["KV cache usage, mean", share(e["kv_cache_usage_mean"])],
                ["requests waiting, peak", number(e["requests_waiting_peak"], 0)],
                ["  of them for capacity, peak", number(e.get("requests_waiting_capacity_peak"), 0)],
                ["  of them deferred by the scheduler, peak", number(e.get("requests_waiting_deferred_peak"), 0)],
                ["requests running, peak", number(e["requests_running_peak"], 0)],
                ["preemptions", number(e["preemptions"], 0)],
                *lora_rows(e),
                ["prefix-cache hit ratio", share(e["prefix_cache_hit_ratio"])],
                ["prompt tokens served from cache", share(e.get("prompt_tokens_cached_share"))],
                ["client: cached share of prompts (usage)", share(c.get("cached_prompt_tokens_ratio"))],
                ["spec-decode acceptance ratio", share(e["spec_decode_acceptance_ratio"])],
                ["spec-decode mean acceptance length", number(e["spec_decode_mean_acceptance_length"])],
                *([["GPU energy over the run (J, DCGM)", number(e["gpu_energy_joules"], 0)],
                   ["energy per output token (J)", number(e.get("energy_per_output_token_joules"), 3)]]
                  if e.get("gpu_energy_joules") is not None else []),
            ]),
            "", "## Where the time goes", "", *where_the_time_goes(c, e)]
    if report.get("ttft_split"):
        lines += ["", *request_by_request(report["ttft_split"], report.get("results_file") or "RUN")]
    if report.get("models"):
        lines += ["", "## Models and adapters", "", *table(MODEL_HEADER, model_cells(report["models"]))]
    if report.get("fleet"):
        lines += ["", "## Replicas", "", *replica_rows(report["fleet"])]
    if report.get("scaling"):
        lines += ["", "## Replicas over time", "", *scaling_rows(report["scaling"])]
    if report["stages"]:
        lines += ["", "## Stages", "", *table(
            ["stage", "level", "requests", "failed", "rejected", "req/s", "output tok/s", "TTFT median", "TTFT p99",
             "TPOT median"],
            [[s["name"], f"{s['level']:g} {s['unit']}", str(s["completed"]), str(s["failed"]),
              str(s.get("rejected") or 0),
              number(s["request_throughput"]), number(s["output_throughput"]),
              ms(s[latency_key("ttft", "median")]), ms(s[latency_key("ttft", "p99")]),
              ms(s[latency_key("tpot", "median")])] for s in report["stages"]])]
    if report.get("turns"):
        lines += ["", "## Sessions, turn by turn", "", *table(
            ["turn", "requests", "failed", "TTFT mean", "TTFT median", "TTFT p99", "prompt tokens", "cached share",
             "tool calls"],
            [[t["turn"], str(t["completed"]), str(t["failed"]), ms(t["mean_ttft_ms"]), ms(t["median_ttft_ms"]),
              ms(t["p99_ttft_ms"]), number(t["mean_prompt_tokens"], 0), share(t["cached_prompt_tokens_ratio"]),
              str(t["tool_calls"])] for t in report["turns"]]),
            "", "The cached share is what the server said it found in its prefix cache for each request "
                "(usage.prompt_tokens_details.cached_tokens, vLLM's --enable-prompt-tokens-details); the engine's "
                f"prefix-cache hit ratio over the run was {share(e.get('prefix_cache_hit_ratio'))}."]
    if report["slo"]:
        lines += ["", "## SLOs", "", *table(["objective", "limit", "measured", "verdict"], [
            [v["name"], f"{v['limit']:g}", number(v["measured"], 3), "met" if v["passed"] else "BROKEN"]
            for v in report["slo"]])]
    if report["plot"]:
        latency = report.get("plot_latency") or "TTFT"
        lines += ["", f"## Client {latency} against engine state", "", f"![client {latency} p99, KV cache usage and "
                  f"requests waiting over time]({report['plot']})"]
    if report["notes"]:
        lines += ["", "## Notes", "", *(f"- {note}" for note in report["notes"])]
    return "\n".join(lines) + "\n"
