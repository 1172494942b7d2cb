"""What makes two runs comparable: the workload they sent, the load (users, rate, shape), the model
served and loadwatch's version (major.minor). Not the server's flags: those are what a release or an
A/B changes, and what a comparison is for."""

from __future__ import annotations

from loadwatch.metrics.results import Results

# The options that make two runs comparable: what was sent and how fast (the rest, such as files
# written or ports, changes nothing measured).
WORKLOAD_OPTIONS = ("dataset", "dataset_path", "input_len", "output_len", "max_tokens", "range_ratio", "prefix_len",
                    "num_prefixes", "suffix_len", "system_len", "turn_len", "turns", "ignore_eos", "temperature",
                    "endpoint", "extra_body", "images_per_request", "image_size", "agent_prefix", "tools",
                    "request_rate", "burstiness", "shape", "max_concurrency", "think_time", "cancel_ratio", "model")


def comparable_key(results: Results) -> dict:
    """What a run must share with another to be compared with it."""
    options = results.options
    models = sorted({name.rsplit(" (", 1)[1].rstrip(")") for name in results.scenarios if " (" in name})
    version_ = results.loadwatch_version or "unknown"
    return {"workload": {k: options.get(k) for k in WORKLOAD_OPTIONS if options.get(k) not in (None, "", [], {})},
            "users": results.users, "models": models, "loadwatch": ".".join(version_.split(".")[:2])}


def differences(runs: dict[str, Results]) -> list[str]:
    """Where the runs differ from the first one, a phrase each: empty when all are comparable."""
    (first, base), *others = runs.items()
    reference = comparable_key(base)
    out = []
    for name, results in others:
        key = comparable_key(results)
        for part in ("workload", "users", "models", "loadwatch"):
            if part == "workload":
                keys = sorted(set(key["workload"]) | set(reference["workload"]))
                changed = [f"{k} {reference['workload'].get(k)} -> {key['workload'].get(k)}" for k in keys
                           if key["workload"].get(k) != reference["workload"].get(k)]
                out += [f"{name} against {first}: workload {', '.join(changed)}"] if changed else []
            elif key[part] != reference[part] and None not in (key[part], reference[part]) \
                    and "unknown" not in (key[part], reference[part]):  # results from before they said it
                out.append(f"{name} against {first}: {part} {reference[part]} -> {key[part]}")
    return out
