"""`loadwatch compare --fail-on`: a release gate on the change, not on an absolute SLO.

A metric fails the gate when its change is worse beyond doubt (its interval lies wholly on the worse
side of 0: the verdict `worse`) and beyond a practical margin (the change itself past the margin: a
1 % regression that is certain is not worth failing a release on). A metric named without a margin
fails on any change worse beyond doubt. A metric with no interval (one run a side for throughput; no
records and one run a side for a latency) cannot be judged, and the gate says so rather than pass it.

A margin smaller than the noise is a gate that cannot work: with TTFT p99 moving ±30 % from run to run,
`+10%` fails only by chance, or never. Where a metric's interval is wider than its margin on either side
of the change (its half-width over the margin), the gate says `noisy` on that metric's line and in its
outcome, with how many times the runs a side would narrow it to the margin (an interval narrows as
one over the square root of the observations). Noisy fails nothing: exit codes are as without it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loadwatch.metrics.repeats import times_to_resolve
from loadwatch.metrics.results import LATENCY_KEYS, latency_key
from loadwatch.report import compare
from loadwatch.report.arguments import DEFAULT_FAIL_ON

THROUGHPUTS = tuple(key for _label, key in compare.THROUGHPUTS)  # one value a run: judged over repeats only
_MARGIN = re.compile(r"^([+-]?\d+(?:\.\d+)?)%?$")


class GateError(ValueError):
    """A --fail-on that names no metric compare measures, or a margin that is not a percentage."""


@dataclass(frozen=True)
class Rule:
    key: str  # compare's key of the metric: p99_ttft_ms, output_throughput, ...
    name: str  # as the user wrote it
    margin: float | None  # % change allowed in the worse direction; None: any change beyond doubt fails
    explicit: bool  # named by the user (a metric it cannot judge then fails the gate as incomplete)


def _key(name: str) -> str:
    """ttft_p99_ms (as --slo names it) or p99_ttft_ms (as results name it) -> p99_ttft_ms."""
    if name in THROUGHPUTS or name in LATENCY_KEYS:
        return name
    parts = name.split("_")
    if len(parts) == 3 and parts[2] == "ms" and latency_key(parts[0], parts[1]) in LATENCY_KEYS:
        return latency_key(parts[0], parts[1])
    known = ", ".join([*THROUGHPUTS, *(f"{k.split('_')[1]}_{k.split('_')[0]}_ms" for k in LATENCY_KEYS)])
    raise GateError(f"--fail-on {name}: not a metric compare measures; one of {known}")


def parse(items: list[str] | None) -> list[Rule]:
    """The rules of --fail-on METRIC[=MARGIN%] (repeatable); the defaults where none is given."""
    explicit = bool(items)
    rules = []
    for item in items or DEFAULT_FAIL_ON:
        name, sep, margin = item.partition("=")
        found = _MARGIN.match(margin.strip()) if sep else None
        if sep and found is None:
            raise GateError(f"--fail-on {item}: the margin is a percentage, e.g. {name}=+10%")
        key = _key(name.strip())
        value = abs(float(found.group(1))) if found else None
        rules.append(Rule(key, name.strip(), value, explicit))
    return rules


@dataclass(frozen=True)
class Judgement:
    rule: Rule
    run: str
    base: str
    row: dict | None  # compare's row for the metric, None where it has none

    @property
    def judged(self) -> bool:
        return self.row is not None and self.row["verdict"] is not None

    @property
    def noise(self) -> float | None:
        """The interval's half-width in %, where it is wider than the margin: the change the gate cannot
        resolve; None where it can (or judges nothing)."""
        if not self.judged or not self.rule.margin:
            return None
        assert self.row is not None
        half = (self.row["ci_high"] - self.row["ci_low"]) / 2
        return half if half > self.rule.margin else None

    @property
    def failed(self) -> bool:
        if not self.judged:
            return False
        assert self.row is not None
        change = self.row["change_pct"]
        beyond = self.rule.margin is None or abs(change) > self.rule.margin
        return self.row["verdict"] == "worse" and beyond

    def line(self) -> str:
        margin = "any change" if self.rule.margin is None else f"{self.rule.margin:g} %"
        if not self.judged:
            return (f"cannot judge {self.rule.name} of {self.run} against {self.base}: it has no interval (repeat "
                    "each side 2 times or more, or keep the per-request records of single runs)")
        assert self.row is not None
        word = "FAIL" if self.failed else "noisy" if self.noise is not None else "ok"
        said = (f"{word}: {self.rule.name} of {self.run} {self.row['change_pct']:+.1f} % "
                f"[{self.row['ci_low']:+.1f} %, {self.row['ci_high']:+.1f} %] against {self.base} "
                f"({self.row['verdict']}; the gate lets {margin} worse through)")
        if self.noise is not None and self.rule.margin and not self.failed:
            said += (f"; its interval spans ±{self.noise:.0f} %, wider than the margin: a change of {margin} is "
                     f"within this metric's noise here, and about {times_to_resolve(self.noise, self.rule.margin)} "
                     "times the runs a side would resolve it")
        return said


def judge(rules: list[Rule], rows: list[dict]) -> list[Judgement]:
    """Each rule against each compared run's row of its metric."""
    runs = list(dict.fromkeys((row["run"], row["base"]) for row in rows))
    by = {(row["run"], row["metric"]): row for row in rows}
    return [Judgement(rule, run, base, by.get((run, rule.key))) for run, base in runs for rule in rules]


def exit_code(judgements: list[Judgement]) -> int:
    """3: a metric failed; 1: a metric the user named, or every metric, could not be judged; else 0."""
    if any(j.failed for j in judgements):
        return 3
    if any(not j.judged and j.rule.explicit for j in judgements) or not any(j.judged for j in judgements):
        return 1
    return 0


OUTCOMES = {0: "gate: passed", 1: "gate: cannot judge (exit 1)", 3: "gate: a regression beyond its margin (exit 3)"}


def outcome(judgements: list[Judgement]) -> str:
    """The gate's outcome, and the metrics it passed only because their noise hides their margin."""
    code = exit_code(judgements)
    noisy = list(dict.fromkeys(j.rule.name for j in judgements if j.noise is not None and not j.failed))
    return OUTCOMES[code] + (f"; noisy: {', '.join(noisy)} (a change of its margin is within its noise)"
                             if noisy and code != 3 else "")


def verdict(judgements: list[Judgement], say) -> int:
    """Each judgement's line, then the gate's: its exit code."""
    for judgement in judgements:
        say(judgement.line())
    say(outcome(judgements))
    return exit_code(judgements)


def markdown(judgements: list[Judgement]) -> str:
    """The gate's lines as a section of compare's markdown: a CI job's artifact or job summary then says
    why the job failed, not only the tables."""
    lines = [f"- {judgement.line()}" for judgement in judgements]
    return "\n## Gate\n\n" + "\n".join(lines) + f"\n\n**{outcome(judgements)}**\n"
