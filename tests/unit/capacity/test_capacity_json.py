"""capacity.json is written and read through its model (issue 60): a file written before the model,
without schema_version, still reads, and what is written reads back the same."""

from __future__ import annotations

import json

from loadwatch.capacity.diagnose import Diagnosis
from loadwatch.capacity.levels import Level
from loadwatch.capacity.output import conclusion, markdown
from loadwatch.metrics.capacity import SCHEMA_VERSION, Capacity

SLO = [{"name": "ttft_p99_ms", "limit": 500.0, "measured": 120.0, "passed": True}]
HELD = Level(1, 2.0, "req/s", "level-01", start=100.0, end=160.0, engine={"kv_cache_usage_peak": 0.4},
             results={"completed": 120, "slo": SLO, "request_throughput": 2.0, "output_throughput": 250.0})
BROKE = Level(2, 4.0, "req/s", "level-02", start=170.0, end=200.0, stopped_early="ttft_p99_ms at 1200",
              results={"completed": 60, "request_throughput": 3.1, "output_throughput": 380.0,
                       "slo": [{**SLO[0], "measured": 1200.0, "passed": False}]})

# capacity.json as the search wrote it before the model (no schema_version), with every key it had.
OLDER = {
    "mode": "rate", "unit": "req/s", "max_sustainable": 2.0, "undecided": None, "recommended": 1.6, "headroom": 0.8,
    "request_throughput_at_max": 2.0, "output_throughput_at_max": 250.0, "price_per_hour": None, "cost_level": None,
    "cost_per_million_output_tokens": None, "cost_per_million_total_tokens": None,
    "cost_per_million_output_tokens_at_max": None, "decisive_level": "level-02", "limit": "batch_slots",
    "limit_explained": "batch slots: the running batch is full", "evidence": {"max_num_seqs": 4, "replicas": {}},
    "room": None,
    "missed": [{"item": "prefix_cache", "explanation": "prefix caching is off",
                "evidence": {"shared_prefix_tokens": 512}}],
    "level_rule": "the rule", "throughput_plateau": {"level": 2.0, "request_throughput": 2.0,
                                                    "most_request_throughput": 3.1},
    "decode_unbounded": False, "levels": [HELD.as_dict(), BROKE.as_dict()],
    "scaling": None,
    "probe": {"requests": 8, "prompt_tokens": 256.0, "ttft_ms": 40.0, "tpot_ms": 9.0, "prefill_ms_per_token": 0.15625,
              "request_throughput": 0.5},
    "max_sustainable_interval": [2.0, 2.0], "rerun_interval": [1.8, 2.2],
    "autoscaling": None,
    "next": [{"why": "relieve the limit", "command": "loadwatch tune --slo=ttft_p99_ms=500"}],
}
# Keys added since (issue 61: the share refused at the knee; what the server did past it), read from an
# older file as not known.
ADDED = {"rejected_ratio_at_max": None, "overload": None}


def test_a_capacity_json_written_before_the_model_reads_as_version_1(tmp_path):
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(OLDER, indent=2) + "\n")
    read = Capacity.read(path)
    assert read.schema_version == SCHEMA_VERSION == 1
    assert (read.max_sustainable, read.limit, read.decisive_level) == (2.0, "batch_slots", "level-02")
    assert read.missed[0].item == "prefix_cache" and read.levels[1].stopped_early == "ttft_p99_ms at 1200"
    assert read.levels[0].client["completed"] == 120 and read.throughput_plateau is not None
    # The same keys, the same values: readers of the file (and its docs) see what they saw before, and
    # the keys added since read as not known.
    assert read.model_dump(mode="json") == {"schema_version": 1, **OLDER, **ADDED}


def test_writing_then_reading_round_trips(tmp_path):
    written = conclusion("rate", "req/s", [HELD, BROKE], 2.0, Diagnosis("slo_only", {}), 0.8, "the rule",
                         decisive=BROKE)
    written.max_sustainable_interval = [2.0, 2.0]
    path = tmp_path / "capacity.json"
    path.write_text(written.json_text())
    read = Capacity.read(path)
    assert read == written
    assert set(json.loads(path.read_text())) == {"schema_version", *OLDER, *ADDED}
    assert markdown(read) == markdown(written)


def test_keys_a_newer_file_adds_are_kept():
    newer = Capacity.model_validate({**OLDER, "schema_version": 2, "something_new": {"a": 1}})
    assert newer.model_dump(mode="json")["something_new"] == {"a": 1}


FLEET = {**OLDER,
         "scaling": {"capacity": {"1": 4.0, "2": 6.0}, "replicas": 2, "efficiency": 0.75,
                     "one_replica_limit": "batch_slots", "one_replica_folder": "replicas-1"},
         "autoscaling": {"signal": "requests in the engine (running and waiting) per replica",
                         "metric": "requests_in_engine", "query": "sum(x) + sum(y)", "threshold": 6.0,
                         "per_replica": True, "held_level": 6.0, "broken_level": 8.0, "at_broken_level": 20.0,
                         "separates": True, "replicas_measured": 2}}


def test_a_fleets_probe_scaling_and_autoscaling_read_as_models_with_the_same_keys(tmp_path):
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(FLEET, indent=2) + "\n")
    read = Capacity.read(path)
    assert read.probe is not None and read.probe.ttft_ms == 40.0
    assert read.scaling is not None and (read.scaling.alone, read.scaling.fleet) == (4.0, 6.0)
    assert read.autoscaling is not None and read.autoscaling.per_replica and read.autoscaling.separates
    assert read.model_dump(mode="json") == {"schema_version": 1, **FLEET, **ADDED}
    assert "### Capacity against replicas" in markdown(read) and "### Autoscaling" in markdown(read)
