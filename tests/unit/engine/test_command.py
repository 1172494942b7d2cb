"""The embedded engine's command line: each request's own account always, speculation's with it."""

from pathlib import Path

from loadwatch.engine.process import command
from loadwatch.engine.settings import EngineSettings

SPEC = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']


def test_every_engine_sends_each_requests_account_and_echoes_its_id():
    args = command(EngineSettings(), Path("/m"), 8000, [])
    assert "--enable-per-request-metrics" in args and "--enable-request-id-headers" in args
    assert "--per-request-spec-decode-metrics" not in args  # vLLM refuses it without speculation


def test_a_speculating_engine_adds_each_requests_acceptance_unless_told_otherwise():
    args = command(EngineSettings(), Path("/m"), 8000, SPEC)
    assert args[args.index("--per-request-spec-decode-metrics") + 1] == "summary"
    own = command(EngineSettings(), Path("/m"), 8000, [*SPEC, "--per-request-spec-decode-metrics=detailed"])
    assert own.count("--per-request-spec-decode-metrics=detailed") == 1 and "summary" not in own
