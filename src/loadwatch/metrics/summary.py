"""End-of-run figures with `vllm bench serve`'s keys and block, computed from raw samples."""

from __future__ import annotations

from array import array

import numpy as np

from loadwatch.metrics.results import STATS, Results, Stage, latency_key
from loadwatch.metrics.samples import Samples, ScenarioSamples
from loadwatch.metrics.slo import FAILURE_RATIO, GOODPUT_METRICS, SLO, Verdict

LATENCIES = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e"}  # key -> column


def _values(series: ScenarioSamples, metric: str) -> np.ndarray:
    values = np.frombuffer(series.column(LATENCIES[metric]), dtype=np.float64)
    return values[~np.isnan(values)] * 1000.0


def statistic(values_ms: np.ndarray, stat: str) -> float | None:
    if values_ms.size == 0:
        return None
    if stat == "mean":
        return float(np.mean(values_ms))
    if stat == "median":
        return float(np.median(values_ms))
    if stat == "std":
        return float(np.std(values_ms))
    return float(np.percentile(values_ms, float(stat[1:])))


def combined(samples: Samples) -> ScenarioSamples:
    total = ScenarioSamples()
    for series in samples.by_labels.values():
        total.extend_from_wire(series.to_wire())
    return total


def _window(series: ScenarioSamples) -> float:
    starts = array("d", series.start) + series.fail_start
    ends = array("d", series.end) + series.fail_end
    return max(ends) - min(starts) if starts else 0.0


def _good_requests(series: ScenarioSamples, slos: list[SLO]) -> int:
    limits = {s.metric: s.limit for s in slos if s.metric in GOODPUT_METRICS}
    good = np.ones(series.completed, dtype=bool)
    for metric, limit in limits.items():
        values = np.frombuffer(series.column(LATENCIES[metric]), dtype=np.float64) * 1000.0
        # A request without TPOT (one token) cannot break a TPOT limit.
        good &= np.isnan(values) | (values <= limit)
    return int(good.sum())


def verdicts(series: ScenarioSamples, slos: list[SLO]) -> list[Verdict]:
    out = []
    for slo in slos:
        if slo.metric == FAILURE_RATIO:
            finished = series.completed + series.failed
            out.append(Verdict(slo, series.failed / finished if finished else None))
        else:
            out.append(Verdict(slo, statistic(_values(series, slo.metric), slo.stat)))
    return out


def figures(series: ScenarioSamples, slos: list[SLO], duration: float | None = None) -> dict:
    """vllm-bench-compatible figures of one set of samples, over their own window unless told."""
    duration = _window(series) if duration is None else duration
    prompt = float(np.nansum(np.frombuffer(series.prompt_tokens, dtype=np.float64)))
    output = float(np.nansum(np.frombuffer(series.completion_tokens, dtype=np.float64)))
    finished = series.completed + series.failed

    def per_second(amount: float) -> float:
        return amount / duration if duration > 0 else 0.0

    out: dict = {
        "completed": series.completed,
        "failed": series.failed,
        "duration": duration,
        "total_input_tokens": int(prompt),
        "total_output_tokens": int(output),
        "request_throughput": per_second(series.completed),
        "request_goodput": per_second(_good_requests(series, slos)),
        "output_throughput": per_second(output),
        "total_token_throughput": per_second(prompt + output),
        "failure_ratio": series.failed / finished if finished else 0.0,
        "failures": dict(sorted(series.failures.items())),
    }
    for metric in LATENCIES:
        values = _values(series, metric)
        for stat in STATS:
            out[latency_key(metric, stat)] = statistic(values, stat)
    return out


def summarize(samples: Samples, slos: list[SLO], stages: list[dict] | None = None) -> tuple[dict, list[Verdict]]:
    """Figures of the whole run, one entry per scenario under `scenarios` and per load-shape stage
    under `stages` (each {name, level, unit, start, end}), and the SLO verdicts."""
    total = combined(samples)
    result = figures(total, slos)
    result["scenarios"] = {
        f"{scenario} ({model})": figures(series, slos)
        for (model, scenario), series in sorted(samples.by_labels.items())
    }
    # A stage's throughput is over the stage's own time: requests sent in it, whenever they finished.
    result["stages"] = [
        {**stage, **figures(total.started_within(stage["start"], stage["end"]), slos, stage["end"] - stage["start"])}
        for stage in stages or []
    ]
    run_verdicts = verdicts(total, slos)
    result["slo"] = [v.as_dict() for v in run_verdicts]
    return result, run_verdicts


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


def format_block(result: Results, verdict_list: list[Verdict]) -> str:
    """The "Serving Benchmark Result" block of `vllm bench serve`, plus failures and SLOs."""
    lines = [
        "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
        _row("Successful requests:", result.completed),
        _row("Failed requests:", result.failed),
        _row("Benchmark duration (s):", result.duration),
        _row("Total input tokens:", result.total_input_tokens),
        _row("Total generated tokens:", result.total_output_tokens),
        _row("Request throughput (req/s):", result.request_throughput),
    ]
    if verdict_list:
        lines.append(_row("Request goodput (req/s):", result.request_goodput))
    lines += [
        _row("Output token throughput (tok/s):", result.output_throughput),
        _row("Total Token throughput (tok/s):", result.total_token_throughput),
    ]
    sections = (
        ("ttft", "Time to First Token", "TTFT"),
        ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
        ("itl", "Inter-token Latency", "ITL"),
        ("e2el", "End-to-end Latency", "E2EL"),
    )
    for key, title, short in sections:
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        lines.append(_row(f"Mean {short} (ms):", result.latency(key, "mean")))
        lines.append(_row(f"Median {short} (ms):", result.latency(key, "median")))
        lines.append(_row(f"P99 {short} (ms):", result.latency(key, "p99")))
    counted_otherwise = {k: n for k, n in result.output_tokens_counted_by.items() if k != "usage"}
    if counted_otherwise:
        lines.append("{s:{c}^{n}}".format(s="Output tokens without usage", n=50, c="-"))
        lines += [_row(f"counted by {how}:", n) for how, n in sorted(counted_otherwise.items())]
    if result.failures:
        lines.append("{s:{c}^{n}}".format(s="Failures", n=50, c="-"))
        lines += [_row(f"{reason}:", n) for reason, n in result.failures.items()]
    if result.stages:
        lines.append("{s:{c}^{n}}".format(s="Stages", n=50, c="-"))
        lines += format_stages(result.stages)
    if verdict_list:
        lines.append("{s:{c}^{n}}".format(s="SLOs", n=50, c="-"))
        lines += [v.describe() for v in verdict_list]
    lines.append("=" * 50)
    return "\n".join(lines)
