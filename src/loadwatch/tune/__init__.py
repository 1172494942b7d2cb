"""`loadwatch tune`: from the limit that binds to the vLLM flag that relieves it, tried and proven."""
