"""Locust's web UI, loadwatch's part: the LLM tab, its charts' history and the engine's state beside
them, and the one-account login."""
