"""Every request starts with the same long system prompt: the prefix cache's best case."""

from itertools import count

from loadwatch.loadgen import LLMUser
from loadwatch.workloads.prompt import Prompt

SYSTEM = " ".join(f"Rule {i}: answer briefly, cite the monitoring runbook section {i}, and stay polite."
                  for i in range(10))
_n = count()


class SharedPrefix(LLMUser):
    scenario = "shared-prefix"

    @staticmethod
    def workload() -> Prompt:
        return Prompt(({"role": "system", "content": SYSTEM},
                       {"role": "user", "content": f"Question number {next(_n)}: what is the status?"}))
