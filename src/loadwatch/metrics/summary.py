"""End-of-run figures with `vllm bench serve`'s keys and block, from the run's sketches."""

from __future__ import annotations

from loadwatch.metrics.results import KEPT_AT_LEAST, SHORT_OF_SCHEDULE, STATS, Arrivals, Results, Stage, latency_key
from loadwatch.metrics.samples import DISTRIBUTIONS, Samples, Series
from loadwatch.metrics.samples import Arrivals as ArrivalSamples
from loadwatch.metrics.sketch import Sketch
from loadwatch.metrics.slo import FAILURE_RATIO, REJECTED_RATIO, SLO, Verdict, ratio


def statistic(sketch: Sketch, stat: str) -> float | None:
    """A statistic of a latency in milliseconds: mean, median, std or pNN."""
    if stat == "mean":
        value = sketch.average()
    elif stat == "std":
        value = sketch.std()
    else:
        value = sketch.quantile(0.5 if stat == "median" else float(stat[1:]) / 100)
    return None if value is None else value * 1000.0


def verdicts(series: Series, slos: list[SLO]) -> list[Verdict]:
    out = []
    for slo in slos:
        if slo.is_ratio:
            out.append(Verdict(slo, ratio(slo.metric, series.completed, series.failed, series.rejected)))
        else:
            out.append(Verdict(slo, statistic(series.latency[slo.metric], slo.stat)))
    return out


def arrival_figures(arrivals: ArrivalSamples, requested_rate: float | None) -> dict:
    """How an open loop's schedule was kept: its rates from the span of the arrivals' due and actual
    times ((n - 1) gaps over a span), and the lag's percentiles."""
    n = arrivals.scheduled
    due_span, at_span = arrivals.due[1] - arrivals.due[0], arrivals.at[1] - arrivals.at[0]
    timed = n > 1 and due_span > 0 and at_span > 0
    kept = due_span / at_span if timed else None
    lag = {stat: statistic(arrivals.lag, stat) for stat in ("median", "p90", "p99")}
    lag["max"] = arrivals.lag.high * 1000.0 if arrivals.sent else None
    return Arrivals(sent=arrivals.sent, dropped=arrivals.dropped, requested_rate=requested_rate,
                    scheduled_rate=(n - 1) / due_span if timed else None,
                    achieved_rate=(n - 1) / at_span * arrivals.sent / n if timed else None,
                    kept=kept, lag_ms=lag, fell_short=kept is not None and kept < KEPT_AT_LEAST).model_dump()


def figures(series: Series, duration: float | None = None, requested_rate: float | None = None) -> dict:
    """vllm-bench-compatible figures of one series, over its own window unless told; with an open
    loop's arrivals (`requested_rate`: the rate asked of it, if one was)."""
    duration = series.window() if duration is None else duration
    prompt, output = series.prompt_tokens, series.completion_tokens

    def per_second(amount: float) -> float:
        return amount / duration if duration > 0 else 0.0

    out: dict = {
        "completed": series.completed,
        "failed": series.failed,
        "rejected": series.rejected,
        "cancelled": series.cancelled,
        "duration": duration,
        "total_input_tokens": int(prompt),
        "total_output_tokens": int(output),
        "request_throughput": per_second(series.completed),
        "request_goodput": per_second(series.good),
        "output_throughput": per_second(output),
        "input_throughput": per_second(prompt),
        "total_token_throughput": per_second(prompt + output),
        "failure_ratio": ratio(FAILURE_RATIO, series.completed, series.failed, series.rejected) or 0.0,
        "failures": dict(sorted(series.failures.items())),
        "rejected_ratio": ratio(REJECTED_RATIO, series.completed, series.failed, series.rejected) or 0.0,
        "rejections": dict(sorted(series.rejections.items())),
        "total_tool_calls": series.tallies["tool_calls"],
        "total_reasoning_tokens": series.tallies["reasoning_tokens"],
        "total_cached_tokens": series.tallies["cached_tokens"],
        "total_images": series.tallies["images"],
        "total_image_bytes": series.tallies["image_bytes"],
        # Only over the requests whose server said how much it had cached (None: none said).
        "cached_prompt_tokens_ratio": (series.tallies["cached_tokens"] / series.tallies["cache_reported_prompt_tokens"]
                                       if series.tallies["cache_reported_prompt_tokens"] else None),
    }
    for metric in DISTRIBUTIONS:
        if series.completed and series.latency[metric].average() is None:
            continue  # none of the requests had it: an embedding has no first token, one token no TPOT
        for stat in STATS:
            out[latency_key(metric, stat)] = statistic(series.latency[metric], stat)
    if series.arrivals.scheduled:  # absent, not None, where none were seen: per-request records carry none
        out["arrivals"] = arrival_figures(series.arrivals, requested_rate)
    return out


def summarize(samples: Samples, slos: list[SLO], stages: list[dict] | None = None,
              request_rate: float | None = None) -> tuple[dict, list[Verdict]]:
    """Figures of the whole run, one entry per scenario under `scenarios` and per load-shape stage
    under `stages` (each {name, level, unit, start, end}: its requests are those sent in it, over
    the stage's own time), and the SLO verdicts. `request_rate`: the open loop's, without a shape
    (a shape's stages each ask their own level)."""
    total = samples.total()
    result = figures(total, requested_rate=None if stages else request_rate)
    result["scenarios"] = {f"{scenario} ({model})": figures(series)
                           for (model, scenario), series in sorted(samples.by_scenario().items())}
    by_model = samples.by_model()
    if len(by_model) > 1:  # a traffic split: each model's (LoRA adapter's) own latency beside the run's
        result["models"] = {model: figures(series) for model, series in sorted(by_model.items())}
    result["stages"] = [{**stage, **figures(samples.of_stage(stage["name"]), stage["end"] - stage["start"],
                                            None if stage["unit"] == "users" else stage["level"])}
                        for stage in stages or []]
    if any(stage.get("arrivals") and stage["arrivals"]["fell_short"] for stage in result["stages"]):
        result["arrivals"]["fell_short"] = True  # the run's mark: a stage whose schedule was not kept
    run_verdicts = verdicts(total, slos)
    result["slo"] = [v.as_dict() for v in run_verdicts]
    return result, run_verdicts


def replica_figures(by_replica: Samples, names: frozenset[str], duration: float) -> dict:
    """A fleet's per-replica figures (each replica of `names`, those that served nothing too), the
    successful requests that named none, and the busiest replica's share over an even share."""
    completed = {name: by_replica.of((name,)).completed for name in names}
    attributed = sum(completed.values())
    replicas = {name: {**figures(by_replica.of((name,)), duration),
                       "share": completed[name] / attributed if attributed else 0.0} for name in sorted(names)}
    busiest = max(completed.values(), default=0)
    return {"replicas": replicas,
            "busiest_share_ratio": busiest * len(names) / attributed if attributed else None}


def format_replicas(result: Results) -> list[str]:
    """A line per replica: its share of the requests, its TTFT and TPOT medians and p99s, and the failed
    requests whose answer named it (smg's header), where there were any."""
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = [f"{name}: {r.completed} ({r.share:.0%}), TTFT median/p99 {ms(r.latency('ttft', 'median'))}/"
             f"{ms(r.latency('ttft', 'p99'))} ms, TPOT {ms(r.latency('tpot', 'median'))}/"
             f"{ms(r.latency('tpot', 'p99'))} ms" + (f", {r.failed} failed" if r.failed else "")
             for name, r in result.replicas.items()]
    if result.busiest_share_ratio is not None:
        lines.append(_row("Busiest replica's share (even = 1):", result.busiest_share_ratio))
    if result.unattributed:
        lines.append(_row("Served by no named replica:", result.unattributed))
    for lost in result.replicas_lost:
        def after(seconds: float | None, still: str) -> str:
            return still if seconds is None else f"after {seconds:.1f} s"

        lines.append(f"replica {lost['replica']} lost at +{lost['lost_at'] - result.started_at:.1f} s"
                     + (f", back at +{lost['back_at'] - result.started_at:.1f} s" if lost["back_at"] else "")
                     + f": {lost['failed_in_window']} requests failed in its outage; the router stopped sending "
                     f"to it {after(lost['router_stopped_after_s'], 'never (still at the end)')}; the client's "
                     f"success rate recovered {after(lost['recovered_after_s'], 'never in the run')}")
    lines += [fault_line(fault, result.started_at) for fault in result.faults]
    return lines


def fault_line(fault: dict, started_at: float) -> str:
    """A fault (--fault-at) as the summary and the report say it."""
    def figure(value: float | None, words: str) -> str:
        return "" if value is None else f", {value:g} {words}"

    lasting = f" for {fault['duration_s']:g} s" if fault.get("duration_s") else ""
    held = fault.get("slo_held_again_s")
    return (f"fault {fault['action']}:{fault['replica']}{lasting} at +{fault['asked'] - started_at:.1f} s"
            + (f" (not made: {fault['error']})" if fault.get("error") else "")
            + f": {fault['not_served']} requests not served (failed or refused) and {fault['outside_slo']} "
            f"succeeded outside the SLOs until the next fault or the end"
            f"{figure(fault['router_retries'], 'retries by the router')}"
            + figure(fault["breaker_failures"], f"failures counted by {fault['replica']}'s circuit breaker")
            + (" (it opened)" if fault["breaker_opened"] else "")
            + "; served within the SLOs again "
            + ("never in the run" if held is None else f"after {held:g} s"))


def _row(label: str, value: object) -> str:
    if isinstance(value, float):
        value = f"{value:.2f}"
    elif value is None:
        value = "n/a"
    return f"{label:<40} {value:<10}"


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def format_stages(stages: list[Stage]) -> list[str]:
    """One line per stage: its level, throughputs and the latencies a step test is read by."""
    lines = [f"{'stage':<10} {'level':>8} {'req/s':>7} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p99':>9} "
             f"{'TPOT p50':>9} {'failed':>6}"]
    for st in stages:
        level = f"{st.level:g}{'u' if st.unit == 'users' else '/s'}"
        lines.append(f"{st.name:<10} {level:>8} {st.request_throughput:>7.2f} {st.output_throughput:>8.1f} "
                     f"{_cell(st.latency('ttft', 'median')):>9} {_cell(st.latency('ttft', 'p99')):>9} "
                     f"{_cell(st.latency('tpot', 'median')):>9} {st.failed:>6}")
    return lines


def process_name(name: str) -> str:
    """A Locust process as people name it: `worker 0` (its index), `master` or `local`."""
    return f"worker {name}" if name.isdigit() else name


def busy_text(busy: dict[str, float]) -> str:
    """`worker 0 45%, worker 1 43%, master 4%`: how busy each Locust process was (one alone: its share only)."""
    if len(busy) == 1:
        return f"{next(iter(busy.values())):.0%}"
    return ", ".join(f"{process_name(name)} {share:.0%}" for name, share in busy.items())


def format_arrivals(arrivals: Arrivals) -> list[str]:
    """The schedule asked, drawn and kept, and how late arrivals went out; a run that kept under
    KEPT_AT_LEAST of its schedule's pace is marked."""
    lag = arrivals.lag_ms
    lines = [_row("Requested rate (req/s):", arrivals.requested_rate)] if arrivals.requested_rate else []
    lines += [_row("Scheduled rate, as drawn (req/s):", arrivals.scheduled_rate),
              _row("Achieved rate (req/s):", arrivals.achieved_rate),
              _row("Arrival lag median / p99 (ms):", f"{_cell(lag.get('median'))} / {_cell(lag.get('p99'))}")]
    if arrivals.dropped:
        lines.append(_row("Dropped at --max-concurrency:", arrivals.dropped))
    if arrivals.fell_short:
        kept = f"{arrivals.kept:.0%} of" if arrivals.kept is not None else "short of"
        lines.append(f"sent at {kept} the schedule's pace: {SHORT_OF_SCHEDULE}; add --processes")
    return lines


def format_block(result: Results, verdict_list: list[Verdict]) -> str:
    """The "Serving Benchmark Result" block of `vllm bench serve`, plus failures and SLOs."""
    lines = [
        "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
        _row("Successful requests:", result.completed),
        _row("Failed requests:", result.failed),
        *([_row("Rejected requests (admission):", result.rejected)] if result.rejected else []),
        *([_row("Cancelled requests (hung up):", result.cancelled)] if result.cancelled else []),
        *([_row("Outcomes unknown (worker lost):", result.unknown_outcomes)] if result.lost_workers else []),
        _row("Benchmark duration (s):", result.duration),
        _row("Total input tokens:", result.total_input_tokens),
        _row("Total generated tokens:", result.total_output_tokens),
        _row("Request throughput (req/s):", result.request_throughput),
    ]
    if verdict_list:
        lines.append(_row("Request goodput (req/s):", result.request_goodput))
    generated = result.total_output_tokens or not result.completed
    lines += [
        _row("Output token throughput (tok/s):", result.output_throughput),
        _row("Total Token throughput (tok/s):", result.total_token_throughput),
    ] if generated else [_row("Input token throughput (tok/s):", result.input_throughput)]
    if result.cost_per_million_output_tokens is not None:
        lines.append(_row(f"Cost per 1M output tokens ($, at ${result.price_per_hour:g}/h):",
                          result.cost_per_million_output_tokens))
    if result.cost_per_million_total_tokens is not None:
        lines.append(_row("Cost per 1M total tokens ($):", result.cost_per_million_total_tokens))
    sections: tuple[tuple[str, str, str], ...] = (
        ("ttft", "Time to First Token", "TTFT"),
        ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
        ("itl", "Inter-token Latency", "ITL"),
        ("e2el", "End-to-end Latency", "E2EL"),
    )
    if result.total_reasoning_tokens:  # the answer comes after the thoughts: its own wait
        sections = (*sections[:1], ("ttfa", "Time to First Answer Token", "TTFA"), *sections[1:])
    for key, title, short in sections:
        if result.completed and result.latency(key, "mean") is None:
            continue  # no request had it (embeddings and rerank have no first token)
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        lines.append(_row(f"Mean {short} (ms):", result.latency(key, "mean")))
        lines.append(_row(f"Median {short} (ms):", result.latency(key, "median")))
        lines.append(_row(f"P99 {short} (ms):", result.latency(key, "p99")))
    extras = [_row("Tool calls:", result.total_tool_calls) if result.total_tool_calls else None,
              _row("Reasoning tokens:", result.total_reasoning_tokens) if result.total_reasoning_tokens else None,
              _row("Cached prompt tokens (ratio):", result.cached_prompt_tokens_ratio)
              if result.cached_prompt_tokens_ratio is not None else None,
              _row("Images (bytes):", f"{result.total_images} ({result.total_image_bytes})")
              if result.total_images else None]
    if any(extras):
        lines.append("{s:{c}^{n}}".format(s="Tools, reasoning, cache, images", n=50, c="-"))
        lines += [line for line in extras if line]
    counted_otherwise = {k: n for k, n in result.output_tokens_counted_by.items() if k != "usage"}
    if counted_otherwise:
        lines.append("{s:{c}^{n}}".format(s="Output tokens without usage", n=50, c="-"))
        lines += [_row(f"counted by {how}:", n) for how, n in sorted(counted_otherwise.items())]
    if result.trace_entries_skipped:
        lines.append(_row("Trace entries skipped (too long):", result.trace_entries_skipped))
    if result.streams_without_done:
        lines.append(_row("Streams ended without [DONE]:", result.streams_without_done))
    if result.failures:
        lines.append("{s:{c}^{n}}".format(s="Failures", n=50, c="-"))
        lines += [_row(f"{reason}:", n) for reason, n in result.failures.items()]
    if result.rejections:
        lines.append("{s:{c}^{n}}".format(s="Rejected by admission control", n=50, c="-"))
        lines += [_row(f"{reason}:", n) for reason, n in result.rejections.items()]
        lines.append(_row("Rejected ratio:", f"{result.rejected_ratio:.2%}"))
    if result.arrivals is not None:
        lines.append("{s:{c}^{n}}".format(s="Open loop", n=50, c="-"))
        lines += format_arrivals(result.arrivals)
    if result.busy:
        lines.append(_row("Load generator CPU (of a core):", busy_text(result.busy)))
    if result.saturated:
        lines.append("{s:{c}^{n}}".format(s="Load generator saturated", n=50, c="-"))
        lines += [f"process {name}: {why}" for name, why in sorted(result.saturated.items())]
        lines.append("figures include its own delays: add --processes")
    if result.replicas:
        lines.append("{s:{c}^{n}}".format(s="Replicas", n=50, c="-"))
        lines += format_replicas(result)
    if result.stages:
        lines.append("{s:{c}^{n}}".format(s="Stages", n=50, c="-"))
        lines += format_stages(result.stages)
    if verdict_list:
        lines.append("{s:{c}^{n}}".format(s="SLOs", n=50, c="-"))
        lines += [v.describe() for v in verdict_list]
    lines.append("=" * 50)
    return "\n".join(lines)
