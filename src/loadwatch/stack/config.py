"""Prometheus and Alertmanager configs for one run: the repository's files with this run's ports."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from loadwatch.stack.settings import StackSettings


def render_prometheus(settings: StackSettings, out_dir: Path, client: str, exporter: str, vllm: list[str],
                      alertmanager: str) -> Path:
    """`vllm`: the address of each engine, scraped directly too (each replica of a fleet)."""
    config = yaml.safe_load((settings.prometheus_dir / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = settings.scrape_interval
    config["global"]["evaluation_interval"] = settings.evaluation_interval
    config["global"]["scrape_timeout"] = settings.scrape_interval
    config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [alertmanager]
    addresses = {"loadwatch-client": [client], "loadwatch-engine": [exporter], "vllm": vllm}
    config["scrape_configs"] = [job for job in config["scrape_configs"] if job["job_name"] in addresses]
    for job in config["scrape_configs"]:
        job["static_configs"][0]["targets"] = addresses[job["job_name"]]
    out_dir.mkdir(parents=True, exist_ok=True)
    rules = out_dir / "rules"
    shutil.rmtree(rules, ignore_errors=True)
    shutil.copytree(settings.rules_dir or settings.prometheus_dir / "rules", rules)
    path = out_dir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def render_alertmanager(settings: StackSettings, out_dir: Path, webhook_url: str) -> Path:
    config = yaml.safe_load((settings.prometheus_dir / "alertmanager.yml").read_text())
    config["route"]["group_wait"] = settings.group_wait
    config["route"]["group_interval"] = settings.group_interval
    config["receivers"][0]["webhook_configs"][0]["url"] = webhook_url
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
