"""Prometheus recording rules generated from the metric catalogue (alerts stay hand-written YAML)."""
