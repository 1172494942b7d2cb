"""Prometheus recording and alerting rules, generated: the catalogue names the series, alerts.py the alerts."""
