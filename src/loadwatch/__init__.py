"""loadwatch: Prometheus-native load testing and observability for vLLM."""
