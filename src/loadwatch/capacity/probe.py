"""The engine's own speed, measured alone before a search: one user, a fixed workload, a few seconds.

A search's knee moves with the configuration and the load, but also with the engine itself (its cores,
its threads, the machine under it). Two searches whose probes differ measured two different engines,
whatever their flags say: the same prefix scenario held 32 users one day and 140 two days later, and
nothing said whether the engine had changed. The probe's requests are the fixed workload's (random
prompts, so a prefix cache serves none of them), measured by the same Locust user and definitions
as every level; the report sets it beside the knee, and tune says when a step's probe moved from the
baseline's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from loadwatch import assets
from loadwatch.loadrun.locust import INTERRUPTED, Load, LocustRun
from loadwatch.metrics.capacity import Probe
from loadwatch.metrics.results import latency_key

SECONDS = 8.0
INPUT_TOKENS = 128  # with OUTPUT_TOKENS, within the smallest context loadwatch serves (make run's 288)
OUTPUT_TOKENS = 32
WORKLOAD = ["--dataset", "random", "--input-len", str(INPUT_TOKENS), "--max-tokens", str(OUTPUT_TOKENS),
            "--ignore-eos"]
KEPT = ("--model", "--endpoint", "--api-key-file")  # the template's options the probe keeps: which server and model
CHANGED = 0.25  # two probes whose TTFT or TPOT differ by more than this measured different engines


def probe_run(template: LocustRun, results: Path) -> LocustRun:
    """One user of the shipped chat scenario on the fixed workload, keeping only the template's options
    that say which model to ask for and how."""
    kept = []
    options = list(template.options)
    for i, word in enumerate(options):
        name = word.split("=")[0]
        if name in KEPT:
            kept += [word] if "=" in word else options[i:i + 2]
    return replace(template, locustfile=assets.locustfile(), results=results, slo=[], stage_name="probe",
                   load=Load(users=1, duration=SECONDS), options=[*WORKLOAD, *kept], checkpoint_interval=None)


def probe(template: LocustRun, target: str, run_dir: Path, say) -> Probe | None:
    """The engine's speed alone, or None where the probe measured nothing (said). Ctrl-C is raised again."""
    run_dir.mkdir(parents=True, exist_ok=True)  # a --scaling search's replicas-1/ is made by its first file
    run = probe_run(template, run_dir / "probe.json")
    say(f"probe: the engine alone, 1 user for {SECONDS:g} s ({INPUT_TOKENS} prompt tokens, {OUTPUT_TOKENS} out)")
    finished = run.run(target, run_dir / "probe.log", say)
    if finished.code == INTERRUPTED:
        raise KeyboardInterrupt
    figures = run.figures() or {}
    found = of_results(figures)
    if found is None:
        say(f"probe: no request completed (see {run_dir / 'probe.log'}); the search goes on without it")
        return None
    say(f"probe: TTFT {found.ttft_ms:.1f} ms ({found.prefill_ms_per_token:.3f} ms a prompt token), "
        f"TPOT {found.tpot_ms:.2f} ms, over {found.requests} requests")
    return found


def of_results(figures: dict) -> Probe | None:
    completed = figures.get("completed") or 0
    ttft, tpot = figures.get(latency_key("ttft", "median")), figures.get(latency_key("tpot", "median"))
    if not completed or ttft is None or tpot is None:
        return None
    prompt = (figures.get("total_input_tokens") or 0) / completed or INPUT_TOKENS
    return Probe(requests=completed, prompt_tokens=round(prompt, 1), ttft_ms=ttft, tpot_ms=tpot,
                 prefill_ms_per_token=ttft / prompt, request_throughput=figures.get("request_throughput"))


def probe_change(before: Probe | None, after: Probe | None) -> str | None:
    """Where two probes measured different engines (TTFT or TPOT apart by more than CHANGED), how:
    `TTFT -75%, TPOT -76%`; else None."""
    if not before or not after:
        return None
    changes = {name: new / old - 1 for name, old, new in (("TTFT", before.ttft_ms, after.ttft_ms),
                                                          ("TPOT", before.tpot_ms, after.tpot_ms)) if old and new}
    moved = [f"{name} {change:+.0%}" for name, change in changes.items() if abs(change) > CHANGED]
    return ", ".join(moved) or None
