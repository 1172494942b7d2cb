"""Sending requests: the Locust user that streams them, which model it asks, which requests a run may
still send (and which are warm-up), and the load's shape over time."""
