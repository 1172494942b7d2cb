"""Agent sessions: each user a conversation with tools, its history growing with the model's answers
(`--dataset sessions`, unless --dataset names another): `locust -f locustfiles/agent.py -H URL`."""

from loadwatch.loadgen import LLMUser


class Agent(LLMUser):
    scenario = "agent"
    dataset = "sessions"
