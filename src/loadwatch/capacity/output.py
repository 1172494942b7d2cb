"""What a capacity search leaves in its run folder: capacity.json, report.md and a plot."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from loadwatch.atomic import write_atomically
from loadwatch.capacity.diagnose import Diagnosis, overload
from loadwatch.capacity.levels import Level
from loadwatch.capacity.probe import CHANGED
from loadwatch.capacity.room import KEYS, sentence
from loadwatch.metrics.capacity import Autoscaling, Capacity, Scaling
from loadwatch.metrics.records import read_records
from loadwatch.metrics.slo import SLO
from loadwatch.prometheus import PrometheusAPI
from loadwatch.report.html import PAGE, capacity_charts
from loadwatch.report.markdown import bands, table, where_the_time_goes
from loadwatch.report.page import markdown_html, write_page

PLOT = "capacity.png"


def conclusion(mode: str, unit: str, levels: list[Level], best: float | None, diagnosis: Diagnosis,
               headroom: float, rule: str, undecided: str | None = None, decisive: Level | None = None,
               slos: list[SLO] | None = None) -> Capacity:
    """`undecided`: why the search stopped before it located the knee, if it did; `decisive`: the
    level whose figures the diagnosis read (`loadwatch explain` tells its requests' stories)."""
    at_best = next((lv for lv in levels if lv.value == best and lv.passed), None)
    recommended = None if best is None else round(best * headroom, 3 if unit == "req/s" else 0)
    # Cost is quoted where a user runs: the held level nearest at or below the operating point, as measured.
    at_point = max((lv for lv in levels if lv.passed and recommended is not None and lv.value <= recommended),
                   key=lambda lv: lv.value, default=None)
    return Capacity(
        mode=mode,
        unit=unit,
        max_sustainable=best,
        undecided=undecided,
        recommended=recommended,
        headroom=headroom,
        request_throughput_at_max=at_best.results.get("request_throughput") if at_best else None,
        output_throughput_at_max=at_best.results.get("output_throughput") if at_best else None,
        rejected_ratio_at_max=(at_best.results.get("rejected_ratio") or 0.0) if at_best else None,
        price_per_hour=at_point.results.get("price_per_hour") if at_point else None,
        cost_level=at_point.value if at_point else None,
        cost_per_million_output_tokens=at_point.results.get("cost_per_million_output_tokens") if at_point else None,
        cost_per_million_total_tokens=at_point.results.get("cost_per_million_total_tokens") if at_point else None,
        cost_per_million_output_tokens_at_max=(at_best.results.get("cost_per_million_output_tokens")
                                               if at_best else None),
        decisive_level=decisive.name if decisive else None,
        limit=diagnosis.limit,
        limit_explained=diagnosis.explanation,
        evidence=diagnosis.evidence,
        room=sentence(diagnosis.evidence) if "kv_cache_holds_requests" in diagnosis.evidence else None,
        missed=diagnosis.missed,
        level_rule=rule,
        overload=overload(decisive.results, decisive.engine) if decisive and not decisive.passed else None,
        throughput_plateau=plateau(levels),
        decode_unbounded=decode_unbounded(slos or []),
        levels=[lv.as_dict() for lv in levels],
    )


def _words(evidence: dict, skip: tuple[str, ...] = ()) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in evidence.items()
                     if v is not None and not isinstance(v, dict | list) and k not in skip)


def _states(each: dict[str, dict]) -> str:
    """Replicas' or ranks' peaks in words: which one queued, which one had room."""
    return "; ".join(f"{name}: {_ms(r['requests_waiting_peak'])} waiting, {_ms(r['requests_running_peak'])} running, "
                     "KV cache " + ("n/a" if r["kv_cache_usage_peak"] is None else f"{r['kv_cache_usage_peak']:.0%}")
                     for name, r in each.items())


def refusing_words(result: Capacity) -> str:
    """` by refusing 2.1 % of its requests` where the knee held only so (a rejected_ratio SLO allowing
    it): a server that holds its SLO by refusing is not one that holds it outright."""
    share = result.rejected_ratio_at_max
    return f" by refusing {share:.1%} of its requests" if share else ""


PLATEAU = 0.95  # a level serving this share of the most any level served: throughput stopped growing there
DECODE_BOUNDS = ("tpot", "itl", "e2el")  # an SLO on one of these bounds how long a request's decode may take


def plateau(levels: list[Level]) -> dict | None:
    """The lowest level that served PLATEAU of the most requests a second any level served: past it the
    load added waiting, not throughput, whatever the SLO's knee says."""
    served = [(lv.value, float(lv.results["request_throughput"])) for lv in levels
              if lv.results and lv.results.get("request_throughput")]
    if len(served) < 2:
        return None
    most = max(rate for _, rate in served)
    value, rate = min((pair for pair in served if pair[1] >= PLATEAU * most), key=lambda pair: pair[0])
    return {"level": value, "request_throughput": rate, "most_request_throughput": most}


def decode_unbounded(slos: list[SLO]) -> bool:
    """Whether the SLOs leave decode free: no TPOT, ITL or end-to-end objective. A users-knee then
    moves with whatever lets TTFT stay under its limit while the decode queue grows."""
    return bool(slos) and not any(slo.metric in DECODE_BOUNDS for slo in slos)


def interval_words(result: Capacity) -> str:
    """` (95 % interval low to high, ...)`: the loads whose verdicts were beyond doubt, and those in doubt,
    as each level's own requests tell them; then, where the engine was probed, where a second search on
    another start of it may land (interval.rerun_interval)."""
    low, high = result.max_sustainable_interval or (None, None)
    if high is None:
        return ""
    unit = result.unit
    words = (f" (95 % interval {'below' if low is None else f'{low:g} to'} {high:g} {unit}, from its levels' own "
             "requests")
    again_low, again_high = result.rerun_interval or (None, None)
    if again_high is not None:
        words += (f"; a second search, on an engine within {CHANGED:.0%} of this one's probe, may hold "
                  f"{'below' if again_low is None else f'{again_low:g} to'} {again_high:g} {unit}")
    return words + ")"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def markdown(result: Capacity, run_dir: Path | None = None) -> str:
    """`run_dir`: where the levels' files are, for the exact `loadwatch explain` command."""
    unit, best = result.unit, result.max_sustainable
    lines = ["## Capacity", ""]
    if result.undecided:
        lines.append(f"**The knee was not located**: {result.undecided}. "
                  + (f"{best:g} {unit} held, so the server sustains at least that; " if best is not None else "")
                  + "what lies above is not known.")
    elif best is None:
        lines.append(f"No level held its SLOs: nothing is sustainable down to the lowest level tried "
                     f"({min((lv.level for lv in result.levels), default=0):g} {unit}).")
    else:
        lines += [f"**{best:g} {unit}**{interval_words(result)} is the most this server sustained within its SLOs"
                  f"{refusing_words(result)} "
                  f"({result.request_throughput_at_max or 0:.2f} req/s, "
                  f"{result.output_throughput_at_max or 0:.0f} output tok/s); run it at "
                  f"**{result.recommended or 0:g} {unit}** ({result.headroom:.0%} of it)."]
    if result.cost_per_million_output_tokens is not None:
        lines += ["", f"At ${result.price_per_hour or 0:g} an hour: **${result.cost_per_million_output_tokens:.4g} "
                      f"per 1M output tokens** (${result.cost_per_million_total_tokens or 0:.4g} per 1M total tokens) "
                      f"at {result.cost_level or 0:g} {unit}, the held level nearest at or below the operating point"
                  + (f"; ${result.cost_per_million_output_tokens_at_max:.4g} at the knee."
                     if result.cost_per_million_output_tokens_at_max is not None else ".")]
    top = result.throughput_plateau
    if top and best is not None and top.level < best:
        lines += ["", f"Throughput stopped growing at **{top.level:g} {unit}** ({top.request_throughput:.2f} "
                      f"req/s, {PLATEAU:.0%} of the most any level served, {top.most_request_throughput:.2f}): "
                      f"past it each {'user' if unit == 'users' else 'request a second'} added waiting, not "
                      "throughput, and the knee above it is where that waiting broke the SLO."]
    if result.decode_unbounded:
        lines += ["", "The SLOs bound no TPOT, ITL or end-to-end latency: decode is free to grow, so the knee "
                      "moves with whatever keeps TTFT under its limit while requests wait to decode. Add "
                      "`--slo tpot_p99_ms=...` or `--slo e2el_p99_ms=...` for a knee users feel."]
    if result.probe:
        p = result.probe
        lines += ["", f"The engine alone, before the search (1 user, {p.prompt_tokens:g} prompt tokens, "
                      f"{p.requests} requests): TTFT {p.ttft_ms:.1f} ms ({p.prefill_ms_per_token:.3f} ms a "
                      f"prompt token), TPOT {p.tpot_ms:.2f} ms. A search whose probe differs by more than "
                      f"{CHANGED:.0%} measured another engine, whatever its flags."]
    evidence = result.evidence
    limit_words = _words(evidence, (*KEYS, "why"))
    lines += ["", f"The limit that binds: **{result.limit_explained}** ({limit_words})."
              + (f" {result.room}" if result.room else "")
              + (f" The router's doing: {evidence['why']}." if evidence.get("why") else "")]
    if evidence.get("rejections_per_level"):
        lines += ["", "The server's refusals by level: " + ", ".join(
            f"{r['level']:g} {unit} {r['rejected_ratio']:.1%} ({r['rejected']})" for r in evidence[
                "rejections_per_level"]) + "; by reason at that level: " + (", ".join(
                    f"{reason} {n}" for reason, n in evidence["rejections"].items()) or "none given")
                  + ("; the admitted requests " + ("kept" if evidence["admitted_within_slo"] else "broke")
                     + " their latency SLOs" if evidence.get("admitted_within_slo") is not None else "") + "."]
    if evidence.get("replicas"):
        lines += ["", "The replicas at that level: " + _states(evidence["replicas"]) + " (peaks)."]
    for server, ranks in (evidence.get("ranks") or {}).items():
        lines += ["", f"The data-parallel ranks of {server} at that level: "
                  + _states({f"rank {rank}": r for rank, r in ranks.items()}) + " (peaks; vLLM's `engine` label)."]
    for item in result.missed:
        lines += ["", f"Missed: **{item.item.replace('_', ' ')}**: {item.explanation} ({_words(item.evidence)})."]
    if result.overload:
        lines += ["", f"Past the knee, the server queued: {result.overload['explanation']}."]
    lines += _scaling(result.scaling, unit) + _autoscaling(result.autoscaling, unit)
    for step in result.next:
        lines += ["", f"Next, {step.why}:", "", f"    {step.command}"]
    lines += ["", f"Each level: {result.level_rule} A level is in doubt where an SLO's 95 % interval, from "
                  "its own requests, spans the objective; the interval of the load sustained spans every such "
                  "level.", ""]
    rows = []
    for lv in result.levels:
        c, e = lv.client, lv.engine
        verdict = lv.verdict if lv.passed or not lv.slo or all(s["passed"] for s in lv.slo) else (
            "lost early: " + lv.stopped_early if lv.stopped_early
            else lv.problem or "broke: " + ", ".join(s["name"] for s in lv.slo if not s["passed"]))
        if lv.sure == "in doubt":
            verdict += " (in doubt: " + ", ".join(f"{i['name']} {i['ci_low']:.4g} to {i['ci_high']:.4g}"
                                                  for i in lv.slo_intervals if i["verdict"] == "in doubt") + ")"
        rows.append([f"{lv.level:g}", f"{c['request_throughput'] or 0:.2f}", f"{c['output_throughput'] or 0:.0f}",
                     _ms(c["median_ttft_ms"]), _ms(c["p99_ttft_ms"]), _ms(c["p99_tpot_ms"]),
                     "n/a" if e.get("kv_cache_usage_peak") is None else f"{e['kv_cache_usage_peak']:.0%}",
                     "n/a" if e.get("requests_waiting_peak") is None else f"{e['requests_waiting_peak']:.0f}",
                     f"{c.get('rejected_ratio') or 0:.1%}", verdict])
    lines += table([f"level ({unit})", "measured req/s", "output tok/s", "TTFT p50 ms", "TTFT p99 ms",
                    "TPOT p99 ms", "KV peak", "waiting peak", "refused", "verdict"], rows)
    held = [lv for lv in result.levels if lv.passed and lv.level == best]
    if held:
        lines += ["", f"### Where the time goes at {best:g} {unit}", "",
                  *where_the_time_goes(held[0].client, held[0].engine)]
        if held[0].ttft_split:
            level = Path("levels") / f"{held[0].name}.json"
            lines += ["", *bands(held[0].ttft_split["bands"], str(run_dir / level if run_dir else level))]
    return "\n".join(lines) + "\n"


def _scaling(scaling: Scaling | None, unit: str) -> list[str]:
    if not scaling:
        return []
    rows = [[replicas, "none held" if value is None else f"{value:g}"] for replicas, value in scaling.capacity.items()]
    count, alone, best = scaling.replicas, scaling.alone, scaling.fleet
    said = ("no scaling efficiency: one of the two searches held no level"
            if scaling.efficiency is None or alone is None or best is None else
            f"scaling efficiency **{scaling.efficiency:.0%}**: {count} replicas sustained {best:g} {unit}, "
            f"{count} times one replica's {alone:g} would be {count * alone:g}")
    return ["", "### Capacity against replicas", "", *table(["replicas", f"capacity ({unit})"], rows), "",
            f"{said[0].upper()}{said[1:]}. One replica's search is in {scaling.one_replica_folder}/ (its limit: "
            f"{scaling.one_replica_limit})."]


def _autoscaling(found: Autoscaling | None, unit: str) -> list[str]:
    if not found:
        return []
    broke = ("" if found.at_broken_level is None or found.broken_level is None else
             f" At the level that broke ({found.broken_level:g} {unit}) it was {found.at_broken_level:g}"
             + ("." if found.separates else ": hardly above, so a weak signal for this workload."))
    return ["", "### Autoscaling", "",
            f"Scale on **{found.signal}** with a threshold of **{found.threshold:g}**: its mean over "
            f"{found.held_level:g} {unit}, the highest level that held its SLOs.{broke} The rule is written for "
            "the shipped Kubernetes manifests in autoscaling/: a KEDA ScaledObject (keda-scaledobject.yaml) and an "
            "HPA (hpa.yaml, with prometheus-adapter-rules.yaml). Its query:", "", f"    {found.query}"]


def plot(result: Capacity, path: Path) -> Path:
    levels = sorted(result.levels, key=lambda lv: lv.level)
    x = [lv.level for lv in levels]
    fig = Figure(figsize=(10, 7))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for key, label, style in (("median_ttft_ms", "TTFT p50", "-"), ("p99_ttft_ms", "TTFT p99", "--"),
                              ("p99_tpot_ms", "TPOT p99", ":")):
        top.plot(x, [lv.client[key] for lv in levels], style, marker="o", label=label)
    top.set_ylabel("latency (ms)")
    top.set_yscale("log")
    throughput = top.twinx()
    throughput.plot(x, [lv.client["output_throughput"] for lv in levels], color="tab:green", marker="s",
                    label="output tok/s")
    throughput.set_ylabel("output tokens/s")
    for value, label, colour, down in ((result.max_sustainable, "knee", "tab:red", 12),
                                       (result.recommended, "operating point", "tab:green", 24)):
        if value is not None:
            for axis in (top, bottom):
                axis.axvline(value, color=colour, linestyle="--", linewidth=1)
            top.annotate(f"{label} {value:g}", (value, 1), xycoords=("data", "axes fraction"), xytext=(3, -down),
                         textcoords="offset points", fontsize="small", color=colour)
    lines = top.get_legend_handles_labels()[0] + throughput.get_legend_handles_labels()[0]
    top.legend(lines, [line.get_label() for line in lines], loc="upper left", fontsize="small")
    top.set_title(f"Capacity: latency and throughput against load ({result.limit_explained.split(':')[0]})")
    kv = [lv.engine.get("kv_cache_usage_peak") for lv in levels]
    bottom.plot(x, [None if v is None else v * 100 for v in kv], color="tab:orange", marker="o",
                label="KV cache usage peak (%)")
    bottom.set_ylabel("KV cache peak (%)")
    bottom.set_ylim(0, 105)
    waiting = bottom.twinx()
    waiting.plot(x, [lv.engine.get("requests_waiting_peak") for lv in levels], color="tab:red", marker="^",
                 label="requests waiting, peak")
    waiting.set_ylabel("requests waiting")
    waiting.set_ylim(bottom=0)
    lines = bottom.get_legend_handles_labels()[0] + waiting.get_legend_handles_labels()[0]
    bottom.legend(lines, [line.get_label() for line in lines], loc="upper left", fontsize="small")
    bottom.set_xlabel(f"load ({result.unit})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def write(run_dir: Path, capacity: Capacity, api: PrometheusAPI | None = None) -> None:
    """capacity.json, report.md with its plot, and report.html: the same, with the curve and the
    search over time interactive (the engine's side from `api`, the stack's Prometheus)."""
    write_atomically(run_dir / "capacity.json", capacity.json_text())
    plot(capacity, run_dir / PLOT)
    text = "# loadwatch capacity report\n\n" + markdown(capacity, run_dir)
    write_atomically(run_dir / "report.md",
                     text + f"\n![latency and throughput against load, engine state beneath]({PLOT})\n")
    try:
        records = [r for path in sorted((run_dir / "levels").glob("*.requests.jsonl")) for r in read_records(path)]
    except ValueError:
        records = []
    ran = [lv for lv in capacity.levels if lv.start]
    start, end = (min(lv.start for lv in ran), max(lv.end for lv in ran)) if ran else (0.0, 0.0)
    write_page(run_dir / PAGE, "loadwatch capacity report", markdown_html(text, run_dir),
               capacity_charts(capacity, records, api if ran else None, start, end))
