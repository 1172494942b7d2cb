"""Chat users, plus one user whose requests the engine refuses: failures show on every panel."""

from locust import constant

from loadwatch.loadgen import LLMUser
from loadwatch.workloads.prompt import Prompt


class Chat(LLMUser):
    scenario = "chat"
    weight = 10


class Oversized(LLMUser):
    """max_tokens past the engine's --max-model-len: vLLM answers 400, every two seconds."""

    scenario = "oversized"
    fixed_count = 1
    wait_time = constant(2)

    @staticmethod
    def workload() -> Prompt:
        return Prompt.user_text("Tell me everything.", max_tokens=4096)
