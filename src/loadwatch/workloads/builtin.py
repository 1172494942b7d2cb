"""A few everyday chat prompts: the workload when no dataset is chosen."""

from __future__ import annotations

from loadwatch.workloads.prompt import Cycle, Prompt

QUESTIONS = (
    "Explain in a few sentences what a KV cache is in a transformer inference server.",
    "Write a short Python function that returns the n-th Fibonacci number, with a docstring.",
    "List five practical tips for reducing the latency of a web API.",
    "Summarise the plot of a heist film of your own invention in one paragraph.",
    "What is the difference between throughput and latency? Give an everyday example.",
    "Translate into French: 'The server is busy; please try again in a minute.'",
    "Describe how continuous batching improves GPU utilisation when serving language models.",
    "Suggest three names for a monitoring tool and explain each in one line.",
)


def builtin_prompts() -> Cycle:
    """QUESTIONS in a cycle; every user of a process shares it."""
    return Cycle([Prompt.user_text(q) for q in QUESTIONS])
