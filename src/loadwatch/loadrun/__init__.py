"""A load run against a stack, the one home `run`, `capacity` and `experiment` share: the stack's
lifecycle (`stack.running`) and a headless Locust run with its one Ctrl-C policy (`locust.LocustRun`)."""
