"""Chat completions with everyday prompts: `locust -f locustfiles/chat.py -H http://127.0.0.1:8000`."""

from loadwatch.loadgen import LLMUser


class Chat(LLMUser):
    scenario = "chat"
