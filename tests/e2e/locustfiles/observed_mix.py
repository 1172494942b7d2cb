"""Chat users, an agent whose model must call a tool, and one user whose requests the engine refuses:
failures and tool calls show on every panel."""

from locust import constant

from loadwatch.loadgen import LLMUser
from loadwatch.workloads.prompt import Prompt


class Chat(LLMUser):
    scenario = "chat"
    weight = 10


TOOL = {"type": "function", "function": {"name": "query_metrics", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}


class Agent(LLMUser):
    """A named tool_choice: vLLM's structured output makes even random weights call the tool."""

    scenario = "agent"
    fixed_count = 1

    @staticmethod
    def workload() -> Prompt:
        return Prompt.user_text("How long is the queue?", max_tokens=32, body={
            "tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "query_metrics"}}})


class Oversized(LLMUser):
    """max_tokens past the engine's --max-model-len: vLLM answers 400, every two seconds."""

    scenario = "oversized"
    fixed_count = 1
    wait_time = constant(2)

    @staticmethod
    def workload() -> Prompt:
        return Prompt.user_text("Tell me everything.", max_tokens=4096)
