from argparse import Namespace

import pytest
from pydantic import ValidationError

from loadwatch.settings import LoadSettings


def test_from_options_keeps_the_key_secret():
    options = Namespace(model="", endpoint="chat", max_tokens=64, temperature=None, ignore_eos=True,
                        api_key="sk-very-secret", request_timeout=30.0, metrics_port=0, results_json="r.json",
                        slo=["ttft_p99_ms=500"], host="http://x")
    settings = LoadSettings.from_options(options)
    assert settings.api_key.get_secret_value() == "sk-very-secret"
    assert "sk-very-secret" not in repr(settings)
    public = settings.public_options()
    assert "api_key" not in public and "sk-very-secret" not in str(public)
    assert public["slo"] == ["ttft_p99_ms=500"] and public["max_tokens"] == 64


def test_invalid_values_are_refused():
    with pytest.raises(ValidationError):
        LoadSettings(max_tokens=0)
    with pytest.raises(ValidationError):
        LoadSettings(endpoint="embeddings")
