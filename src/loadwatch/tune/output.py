"""What tune leaves in its run folder: tune.json (DESIGN.md's contract), report.md and report.html
with the Tuning section, and the final configuration three ways: a command line, a compose override
(with the .env line for docker-compose.yml's VLLM_EXTRA_ARGS, and a fleet's ROUTER_POLICY) and a
Kubernetes patch of the shipped vLLM Deployment (with a fleet's replicas), and of the fleet's router
for its policy."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from loadwatch.atomic import write_atomically
from loadwatch.metrics.tune import Gain, Measured, Overload, Tune
from loadwatch.report.markdown import table
from loadwatch.report.page import markdown_html, write_page
from loadwatch.tune.config import Config

COMPOSE, ENV, PATCH = "tuned.compose.yml", "tuned.env", "tuned-patch.yaml"
ROUTER_PATCH = "tuned-router-patch.yaml"  # a fleet's: deploy/kubernetes/components/fleet's router
# Where components/fleet/router.yaml's router container has its --policy (a test keeps them in step).
POLICY_ARG = 4


def by_cost(doc: Tune) -> list[tuple[str, float]]:
    """The configurations measured (the baseline, each adopted step), cheapest per output token first,
    where the run had --price-per-hour: a step that raises capacity also lowers what a token costs."""
    measured = ([("baseline", doc.baseline.capacity)] if doc.baseline else []) + [
        (f"step {s.step}", s.capacity_after) for s in doc.steps if s.verdict == "adopted"]
    costs = [(name, c.cost_per_million_output_tokens) for name, c in measured
             if c and c.cost_per_million_output_tokens is not None]
    return sorted(costs, key=lambda item: item[1])


def compose_override(config: Config) -> str:
    environment = dict(config.env)
    return ("# docker compose -f docker-compose.yml -f tuned.compose.yml up -d, with tuned.env's line in .env\n"
            + yaml.safe_dump({"services": {"vllm": {"environment": environment}}} if environment
                             else {"services": {"vllm": {}}}, sort_keys=False))


def kubernetes_patch(config: Config) -> str:
    """A JSON 6902 patch of deploy/kubernetes/vllm.yaml's Deployment (its first container is vLLM):
    the flags appended to its args, the variables to its env. In kustomization.yaml:
    patches: [{path: tuned-patch.yaml, target: {kind: Deployment, name: vllm}}]"""
    ops: list[dict] = [{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": arg}
                       for arg in config.vllm_args]
    ops += [{"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {"name": name, "value": value}}
            for name, value in config.env]
    if "replicas" in config.fleet_options():  # a fleet's: the Deployment's replicas
        ops.append({"op": "replace", "path": "/spec/replicas", "value": int(config.fleet_options()["replicas"])})
    return yaml.safe_dump(ops, sort_keys=False)


def router_patch(config: Config) -> str | None:
    """A JSON 6902 patch of the fleet component's vllm-router Deployment: its --policy. None where the
    configuration keeps the router's."""
    policy = config.fleet_options().get("router_policy")
    if policy is None:
        return None
    args = "/spec/template/spec/containers/0/args"
    return yaml.safe_dump([{"op": "test", "path": f"{args}/{POLICY_ARG}", "value": "--policy"},
                           {"op": "replace", "path": f"{args}/{POLICY_ARG + 1}", "value": policy}], sort_keys=False)


def _capacity_words(capacity: Measured | None) -> str:
    if capacity is None:
        return "not measured"
    if capacity.max_sustainable is None:
        return "none held"
    return f"{capacity.max_sustainable:g} {capacity.unit}" + (" (knee not located)" if capacity.undecided else "")


def _gain_words(g: Gain) -> str:
    if g.change_pct is None:
        return "n/a"
    return f"{g.metric} {g.change_pct:+.1f}% " + ("" if g.ci_low is None or g.ci_high is None else
                                                   f"[{g.ci_low:+.1f}%, {g.ci_high:+.1f}%]")


def markdown(doc: Tune) -> str:
    lines = ["## Tuning", ""]
    base, final = doc.baseline, doc.final
    if base is None:
        return "\n".join([*lines, f"No baseline: {doc.stopped}", ""])
    lines += [f"Baseline `{shlex.join(base.vllm_args) or '(vLLM defaults)'}`: "
              f"**{_capacity_words(base.capacity)}**, limit {base.limit or 'unknown'}.", ""]
    if doc.steps:
        lines += table(["step", "limit", "change", "why", "verdict", "gain (95 % interval)", "capacity after",
                        "limit after"],
                       [[str(s.step), s.limit or "unknown",
                         f"{s.change.flag} {s.change.before or 'default'} -> {s.change.after}", s.reason,
                         s.verdict + (f": {s.refused}" if s.refused else ""), _gain_words(s.gain),
                         _capacity_words(s.capacity_after) if s.verdict == "adopted" else "",
                         s.limit_after or ("unknown" if s.verdict == "adopted" else "")] for s in doc.steps])
        lines += [""]
    ranked = by_cost(doc)
    if ranked:
        lines += ["By cost per 1M output tokens at the operating point, cheapest first: "
                  + ", ".join(f"{name} ${cost:.4g}" for name, cost in ranked) + ".", ""]
    if final is not None:
        lines += [f"Final: **{_capacity_words(final.capacity)}**, limit {final.limit or 'unknown'}.", "",
                  "```", final.command_line, "```", "",
                  *([f"The fleet: {' '.join(f'{flag} {value}' for flag, value in final.fleet.items())} "
                     "(loadwatch's fleet options; the router's --policy), each replica with the flags above.", ""]
                    if final.fleet else []),
                  "### Apply it", "",
                  "- Your own server: start `vllm serve` with the flags above (and the variables before them).",
                  f"- docker compose: add {ENV}'s lines to `.env`, then "
                  f"`docker compose -f docker-compose.yml -f {COMPOSE} up -d vllm` ({COMPOSE} is in this folder).",
                  f"- Kubernetes: `kubectl -n loadwatch patch deployment vllm --type json --patch-file {PATCH}`, or "
                  f"list {PATCH} under `patches:` of your kustomization (target: the Deployment `vllm`)"
                  + (f"; the router's policy: `kubectl -n loadwatch patch deployment vllm-router --type json "
                     f"--patch-file {ROUTER_PATCH}`." if (final.fleet or {}).get("--router-policy") else "."),
                  "- Then measure it where it serves: `loadwatch capacity --target URL` with the same --slo."]
    if doc.stopped:
        lines += ["", f"Tune stopped: {doc.stopped}."]
    if doc.overload:
        lines += ["", *overload_lines(doc.overload)]
    return "\n".join(lines) + "\n"


def _interval(value: float | None, low: float | None, high: float | None, form: str) -> str:
    if value is None:
        return "n/a"
    return format(value, form) + ("" if low is None or high is None else
                                  f" [{format(low, form)}, {format(high, form)}]")


def overload_lines(o: Overload) -> list[str]:
    """Admission control past the knee, as a table of the trade: the admitted requests' SLO metric
    and the share refused, each with its interval, for the current configuration and each capped one.
    Not adopted: refusing that share for that latency is the user's call."""
    caps = ", ".join(f"`{c.flag} {c.after}`" for c in o.changes)
    lines = ["### Past the knee: admission control", "",
             f"At {o.level:g} {o.unit}, where the final configuration broke, requests queued and none was "
             f"refused. Each cap refuses the excess with a 503 instead: {caps} (sized from the {o.metric} limit "
             "and what the engine served there):", ""]
    lines += [f"The server refused {arm}: {words}." for arm, words in o.refused.items()]
    if len(o.sides) > 1:
        lines += table(["configuration", "rounds", f"{o.metric} of the admitted (95 % interval)",
                        f"within {o.limit:g} ms", "refused (95 % interval)", "goodput req/s"],
                       [[s.arm, str(s.rounds), _interval(s.measured, s.ci_low, s.ci_high, ".0f"),
                         {True: "yes", False: "no", None: "n/a"}[s.within_slo],
                         _interval(s.rejected_ratio, s.rejected_ci_low, s.rejected_ci_high, ".1%"),
                         "n/a" if s.request_goodput is None else f"{s.request_goodput:.2f}"] for s in o.sides])
        lines += ["", "Not adopted: whether refusing that share is worth the latency is yours to say; add the cap "
                      "to the command line above to take it."]
    return [*lines, ""]


def write(run_dir: Path, doc: Tune, config: Config) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(run_dir / "tune.json", doc.json_text())
    text = "# loadwatch tune report\n\n" + markdown(doc)
    write_atomically(run_dir / "report.md", text)
    write_page(run_dir / "report.html", "loadwatch tune report", markdown_html(text, run_dir), [])
    write_atomically(run_dir / COMPOSE, compose_override(config))
    policy = config.fleet_options().get("router_policy")
    write_atomically(run_dir / ENV, f"VLLM_EXTRA_ARGS={shlex.quote(shlex.join(config.vllm_args))}\n"
                     + (f"ROUTER_POLICY={policy}\n" if policy else ""))  # docker-compose.fleet.yml's
    write_atomically(run_dir / PATCH, kubernetes_patch(config))
    if (router := router_patch(config)) is not None:
        write_atomically(run_dir / ROUTER_PATCH, router)
