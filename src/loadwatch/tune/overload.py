"""Past the knee, admission control's trade, measured: tune's last step where the capacity search
found a server that queued without refusing (capacity.json's `overload`).

vLLM's --max-num-queued-tokens refuses a request (HTTP 503) while the prompt tokens waiting for
prefill exceed it; its docstring sizes it as the target TTFT times the prefill rate, which the
search measured at the level that broke. Where requests wait for a batch slot, not for prefill, that
backlog is no measure of the wait (the tune guide's slots scenario: at 268 tokens it never bound;
at 140 it refused half the requests for no TTFT an interval could tell); --max-num-queued-reqs caps
the unfinished requests instead, sized as the batch plus the requests that complete within the
target TTFT, and is tried beside it, an arm of its own (there: TTFT p90 halved, half refused).

A cap moves no knee (a refusal counts against the load sustained), so it is not judged as the
capacity levers are, on goodput. It is judged where it acts: at the load that broke, the current
configuration and each capped one in rounds (a fresh start each), and for each the admitted
requests' SLO metric (TTFT p99, say) with its 95 % interval from their own requests, beside the
share of requests refused with its Wilson interval. Whether refusing that share is worth the SLO is
the user's call: the table shows both, and tune adopts nothing from it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from loadwatch.capacity.interval import RECORD_KEYS, slo_interval
from loadwatch.capacity.levels import level_records
from loadwatch.capacity.options import CapacityOptions
from loadwatch.loadrun.locust import LocustRun
from loadwatch.metrics.bootstrap import CONFIDENCE, statistic
from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.slo import SLO
from loadwatch.metrics.tune import Overload, Side
from loadwatch.settings import records_beside
from loadwatch.tune.config import Change, Config
from loadwatch.tune.server import Server
from loadwatch.tune.trial import Arm, run_trial

# Each cap the capacity search sizes (capacity.json's `overload`), by its flag, and its arm's name.
CAPS = {"--max-num-queued-tokens": ("max_num_queued_tokens", "queued-tokens-cap"),
        "--max-num-queued-reqs": ("max_num_queued_reqs", "queued-reqs-cap")}


def cap_changes(result: Capacity, config: Config) -> list[Change]:
    """The caps the search sized, each where it sized one and the configuration sets none yet."""
    sized = result.overload or {}
    return [Change(flag, None, str(int(sized[key]))) for flag, (key, _) in CAPS.items()
            if sized.get(key) and config.value(flag) is None]


def ttft_slo(slos: list[SLO]) -> SLO | None:
    """The SLO the cap is sized for and judged on: the first on TTFT."""
    return next((slo for slo in slos if slo.metric == "ttft"), None)


def side(arm: str, folder: Path, slo: SLO) -> Side:
    """One arm pooled over its rounds' runs (each run's folder under `folder`, a run started again
    included): its admitted requests' SLO statistic and interval, and the share it refused."""
    runs = sorted(path for path in folder.glob("r*/results.json"))
    figures = [json.loads(path.read_text()) for path in runs]
    records = [r for path in runs for r in level_records(records_beside(path))]
    key = RECORD_KEYS[slo.metric]
    values = np.array([r[key] * 1000 for r in records if r["stage"] != "warmup" and r["failure"] is None
                       and r.get(key) is not None])
    interval = slo_interval(records, slo)
    completed = sum(f.get("completed", 0) for f in figures)
    failed = sum(f.get("failed", 0) for f in figures)
    rejected = sum(f.get("rejected", 0) for f in figures)
    ended = completed + failed + rejected
    share = binomtest(rejected, ended).proportion_ci(CONFIDENCE, method="wilson") if ended else None
    goodput = [f["request_goodput"] for f in figures if "request_goodput" in f]
    return Side(arm=arm, rounds=len(figures), completed=completed, failed=failed, rejected=rejected,
                measured=float(statistic(values, slo.stat)) if len(values) else None,
                ci_low=interval.low, ci_high=interval.high, within_slo=interval.verdict == "held" if
                interval.verdict else None,
                rejected_ratio=rejected / ended if ended else None,
                rejected_ci_low=float(share.low) if share else None,
                rejected_ci_high=float(share.high) if share else None,
                request_goodput=sum(goodput) / len(goodput) if goodput else None)


def verdict(doc: Overload) -> str:
    """The trade in words: the admitted requests' SLO metric against its limit, and the share refused,
    for each capped configuration beside the current one."""
    def words(s: Side) -> str:
        measured = "n/a" if s.measured is None else f"{s.measured:.0f} ms"
        interval = "" if s.ci_low is None or s.ci_high is None else f" [{s.ci_low:.0f}, {s.ci_high:.0f}]"
        refused = "n/a" if s.rejected_ratio is None else f"{s.rejected_ratio:.1%}"
        refused_interval = "" if s.rejected_ci_low is None or s.rejected_ci_high is None else \
            f" [{s.rejected_ci_low:.1%}, {s.rejected_ci_high:.1%}]"
        within = {True: "within", False: "not within", None: "not judged against"}[s.within_slo]
        return f"{doc.metric} {measured}{interval}, {within} its {doc.limit:g} ms, refusing {refused}{refused_interval}"

    current, *capped = doc.sides
    return "; ".join([*(f"with {s.arm}: {words(s)}" for s in capped), f"without: {words(current)}"])


def try_cap(result: Capacity, current: Config, server: Server, template: LocustRun, options: CapacityOptions,
            repeats: int, folder: Path, left: Callable[[], float], say) -> Overload | None:
    """The caps' trial at the level where `result` broke, `repeats` rounds a side; None where the
    search sized no cap, the SLOs bound no TTFT, or no level broke. BudgetSpent where the budget ends
    before its rounds do."""
    changes, slo = cap_changes(result, current), ttft_slo(template.slo)
    level = next((lv for lv in result.levels if lv.name == result.decisive_level and not lv.passed), None)
    if not changes or slo is None or level is None:
        return None
    say(f"overload: trying {'; '.join(c.words() for c in changes)} at {level.level:g} {level.unit}, past the knee, "
        f"judged on the admitted requests' {slo.name} against the share refused")
    arms = [Arm("current", current), *(Arm(CAPS[c.flag][1], current.with_change(c)) for c in changes)]
    # No rounds past `repeats`: more rounds serve a verdict, and this trial reports a trade.
    run_trial(arms, server, template, options, level.level, level.unit, slo.name, repeats, folder, left,
              lambda: 0.0, say)
    doc = Overload(level=level.level, unit=level.unit, changes=[c.record() for c in changes], metric=slo.name,
                   limit=slo.limit, refused={arm.name: arm.refused for arm in arms[1:] if arm.refused})
    for arm in arms[1:]:
        if arm.refused:
            say(f"overload: the server refused {arm.name}: {arm.refused}")
    doc.sides = [side(arm.name, folder / arm.name, slo) for arm in arms if arm.refused is None]
    if len(doc.sides) > 1:
        doc.verdict = verdict(doc)
        say(f"overload: {doc.verdict}")
    return doc
