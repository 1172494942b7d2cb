"""report.json as Markdown: what a person reads after a run."""

from __future__ import annotations

from loadwatch.metrics.results import latency_key


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


def render(report: dict) -> str:
    c, e, w = report["client"], report["engine"], report["window"]
    lines = [
        f"# loadwatch report: run {report['run_id']}",
        "",
        f"Target {report['target'] or 'n/a'}, {w['start_utc']} to {w['end_utc']} (UTC).",
        "",
        "## Client",
        "",
        *table(["requests", "failed", "req/s", "output tok/s", "total tok/s", "goodput req/s"], [[
            str(c["completed"]), str(c["failed"]), number(c["request_throughput"]), number(c["output_throughput"]),
            number(c["total_token_throughput"]), number(c["request_goodput"])]]),
        "",
        *table(["latency", "mean", "median", "p99"], [
            [name.upper(), *(ms(c[latency_key(name, stat)]) for stat in ("mean", "median", "p99"))]
            for name in ("ttft", "tpot", "itl", "e2el")]),
    ]
    if report.get("client_source"):
        lines += ["", f"Client figures {report['client_source']}."]
    if c["failures"]:
        lines += ["", "Failures: " + ", ".join(f"{reason} {n}" for reason, n in c["failures"].items()) + "."]
    if e:
        lines += [
            "", "## Engine", "",
            *table(["figure", "value"], [
                ["KV cache usage, peak", share(e["kv_cache_usage_peak"])],
                ["KV cache usage, mean", share(e["kv_cache_usage_mean"])],
                ["requests waiting, peak", number(e["requests_waiting_peak"], 0)],
                ["requests running, peak", number(e["requests_running_peak"], 0)],
                ["preemptions", number(e["preemptions"], 0)],
                ["prefix-cache hit ratio", share(e["prefix_cache_hit_ratio"])],
                ["spec-decode acceptance ratio", share(e["spec_decode_acceptance_ratio"])],
                ["spec-decode mean acceptance length", number(e["spec_decode_mean_acceptance_length"])],
            ]),
            "", "## Where the time goes", "",
            *table(["", "mean TTFT", "p99 TTFT"], [
                ["client", ms(c[latency_key("ttft", "mean")]), ms(c[latency_key("ttft", "p99")])],
                ["engine", ms(e["engine_mean_ttft_ms"]), ms(e["engine_p99_ttft_ms"])],
                ["outside the engine", ms(e.get("ttft_outside_engine_ms")), ""],
            ]),
            "",
            f"Of the engine's end-to-end time, requests spent {share(e['queue_time_share'])} queued, "
            f"{share(e['prefill_time_share'])} in prefill and {share(e['decode_time_share'])} in decode.",
        ]
    if report["stages"]:
        lines += ["", "## Stages", "", *table(
            ["stage", "level", "requests", "failed", "req/s", "output tok/s", "TTFT median", "TTFT p99", "TPOT median"],
            [[s["name"], f"{s['level']:g} {s['unit']}", str(s["completed"]), str(s["failed"]),
              number(s["request_throughput"]), number(s["output_throughput"]),
              ms(s[latency_key("ttft", "median")]), ms(s[latency_key("ttft", "p99")]),
              ms(s[latency_key("tpot", "median")])] for s in report["stages"]])]
    if report["slo"]:
        lines += ["", "## SLOs", "", *table(["objective", "limit", "measured", "verdict"], [
            [v["name"], f"{v['limit']:g}", number(v["measured"], 3), "met" if v["passed"] else "BROKEN"]
            for v in report["slo"]])]
    if report["plot"]:
        lines += ["", "## Client TTFT against engine state", "", f"![client TTFT p99, KV cache usage and requests "
                  f"waiting over time]({report['plot']})"]
    if report["notes"]:
        lines += ["", "## Notes", "", *(f"- {note}" for note in report["notes"])]
    return "\n".join(lines) + "\n"
