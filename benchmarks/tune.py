"""`loadwatch tune` on the embedded engine, as the issue's scenarios run it, and what a blind grid
over the same two flags would cost, computed from the time this run measured per configuration.

Scenarios (each a `loadwatch tune` of its own, on a fresh engine per configuration):
- `slots`: the engine started mis-tuned, --max-num-seqs=2 with KV cache to spare, `make run`'s search;
- `prefix`: every prompt opens with the same 512 tokens and prefix caching is off.

For each it prints the steps (limit, change, verdict, gain with its interval, capacity after), the
server starts and minutes tune spent, and the grid's: vLLM's auto_tune.sh runs every pair of
--max-num-seqs and --max-num-batched-tokens, one server start and one search each. The grid is not
run: its cost is the number of pairs times the mean seconds of one of this run's capacity searches
(a start included).

    .venv/bin/python benchmarks/tune.py [--scenario slots|prefix|both] [--budget 20m] [--times 3] [--max-steps 1]

With --max-steps 0 the slots scenario is the mis-tuned engine pushed past its knee: tune measures its
baseline, then tries the admission cap that search sized at the level that broke (tune's `overload`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from loadwatch.metrics.tune import Cost, Gain, Tune

REPO = Path(__file__).resolve().parents[1]
SEARCH = ["--mode", "users", "--start", "1", "--slo", "ttft_p90_ms=1000", "--level-duration", "15s",
          "--cool-down", "3s"]
SCENARIOS = {  # name -> (tune's options beside SEARCH, the workload)
    "slots": (["--vllm-arg=--max-num-seqs=2"], ["--max-tokens", "200", "--ignore-eos"]),
    # 26 users held here: a search from 8 users spends fewer levels on the way up.
    "prefix": (["--vllm-arg=--no-enable-prefix-caching", "--start", "8"],
               ["--dataset", "random", "--prefix-len", "512", "--input-len", "64", "--max-tokens", "64",
                "--ignore-eos"]),
}
BUDGETS = {"slots": "20m", "prefix": "35m"}
# auto_tune.sh's defaults (vLLM's benchmarks/auto_tune): the grid it sweeps, one server start a pair.
GRID_NUM_SEQS = (128, 256)
GRID_BATCHED_TOKENS = (512, 1024, 2048, 4096)
# A grid wide enough to reach this scenario's answer from --max-num-seqs=2: powers of two to 256.
WIDE_NUM_SEQS = tuple(2 ** i for i in range(1, 9))


def run(name: str, budget: str, out: Path, steps: list[str]) -> dict:
    flags, workload = SCENARIOS[name]
    env = {**os.environ, "LOADWATCH_STACK_HOME": str(out / "home")}
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "loadwatch.cli", "tune", "--budget", budget, *steps, *SEARCH, *flags,
                           "--out", str(out / name), "--", *workload], capture_output=True, text=True, env=env)
    wall = time.monotonic() - began
    print(done.stdout[-4000:])
    (run_dir,) = [p for p in (out / name).iterdir() if p.is_dir()]
    doc = Tune.read(run_dir / "tune.json")
    return {"doc": doc, "wall": wall, "code": done.returncode, "folder": run_dir}


def _change_words(g: Gain | None) -> str:
    if g is None or g.change_pct is None:
        return "n/a"
    return f"{g.metric} {g.change_pct:+.1f}%" + ("" if g.ci_low is None or g.ci_high is None else
                                                  f" [{g.ci_low:+.1f}%, {g.ci_high:+.1f}%]")


def report(name: str, outcome: dict) -> None:
    doc: Tune = outcome["doc"]
    cost = doc.cost or Cost(server_starts=0, seconds=0.0)
    print(f"## {name}: exit {outcome['code']}, {outcome['wall'] / 60:.1f} min wall, {cost.server_starts} server "
          f"starts, folder {outcome['folder']}")
    base = doc.baseline
    if base and base.capacity:
        print(f"baseline {base.vllm_args}: {base.capacity.max_sustainable} {base.capacity.unit}, limit {base.limit}")
    for s in doc.steps:
        after = s.capacity_after
        beside = "" if s.slo_change is None or s.slo_change.change_pct is None else f" ({_change_words(s.slo_change)})"
        rounds = len(s.runs.with_change_goodput or s.runs.with_change)
        print(f"step {s.step}: {s.limit}: {s.change.flag} {s.change.before} -> {s.change.after}: "
              f"{s.verdict}, {_change_words(s.gain)}{beside}, {rounds} rounds"
              + (f"; after: {after.max_sustainable} {after.unit}, limit {s.limit_after}" if after else ""))
    final = doc.final
    if final:
        knee = f"{final.capacity.max_sustainable} {final.capacity.unit}" if final.capacity else "not measured"
        print(f"final: {final.command_line}: {knee}, limit {final.limit}")
    print(f"stopped: {doc.stopped}")
    if doc.overload:  # past the knee: the admission cap's trade, as the report's table gives it
        o = doc.overload
        print(f"past the knee, at {o.level:g} {o.unit}: {o.verdict or 'no capped arm started'}"
              + "".join(f"; {arm} refused: {words}" for arm, words in o.refused.items()))
    searches = cost.capacity_searches
    if searches:
        per_config = sum(s.seconds for s in searches) / len(searches)
        for label, pairs in (("auto_tune.sh's default grid", len(GRID_NUM_SEQS) * len(GRID_BATCHED_TOKENS)),
                             ("a grid from 2 to 256 seqs", len(WIDE_NUM_SEQS) * len(GRID_BATCHED_TOKENS))):
            print(f"{label}: {pairs} configurations x {per_config / 60:.1f} min (this run's mean capacity search, "
                  f"a start included) = {pairs * per_config / 60:.0f} min and {pairs} server starts, against "
                  f"tune's {cost.seconds / 60:.0f} min and {cost.server_starts} starts")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=[*SCENARIOS, "both"], default="slots")
    parser.add_argument("--budget", help="for each scenario; default: 20m for slots (the issue's), 35m for prefix "
                                         "(its baseline takes 10 levels, its step 3 arms x 3 starts)")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "tune-benchmark",
                        help="where each scenario's run folder is kept (the docs' worked example is one)")
    parser.add_argument("--times", type=int, default=1,
                        help="run each scenario this many times, each from nothing, and count what each adopted "
                             "(the issue's 3 of 3)")
    parser.add_argument("--max-steps", help="tune's --max-steps: 1 ends each run after its first step and the "
                                            "capacity after it, what --times counts; 0 after the baseline, and "
                                            "the admission cap past its knee")
    args = parser.parse_args()
    steps = ["--max-steps", args.max_steps] if args.max_steps else []
    for name in SCENARIOS if args.scenario == "both" else [args.scenario]:
        adopted = []
        for _ in range(args.times):
            outcome = run(name, args.budget or BUDGETS[name], args.out / time.strftime("%Y%m%dT%H%M%S"), steps)
            report(name, outcome)
            first = [s for s in outcome["doc"].steps if s.step == 1]
            adopted.append(next((s.change.flag for s in first if s.verdict == "adopted"),
                                "undecided" if any(s.verdict == "undecided" for s in first) else "none"))
        if args.times > 1:
            print(f"## {name}: step 1 adopted, run by run: {', '.join(adopted)}")


if __name__ == "__main__":
    main()
