"""What loadwatch reads back from the embedded engine's own flags: vLLM exports neither its
--max-num-seqs nor its token budget, and a capacity verdict needs the first."""

from __future__ import annotations

import argparse

# vLLM's --max-num-seqs when none is given, on the CPU for its API server (128 per rank:
# vllm/engine/arg_utils.py, get_batch_defaults).
CPU_DEFAULT_MAX_NUM_SEQS = 128


def given_max_num_seqs(vllm_args: list[str] | tuple[str, ...]) -> int | None:
    """--max-num-seqs as the flags set it, or None."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--max-num-seqs", type=int)
    return parser.parse_known_args(list(vllm_args))[0].max_num_seqs


def max_num_seqs(vllm_args: list[str] | tuple[str, ...]) -> int:
    """The running batch's limit of an embedded engine started with `vllm_args`."""
    given = given_max_num_seqs(vllm_args)
    return CPU_DEFAULT_MAX_NUM_SEQS if given is None else given
