from argparse import Namespace

import pytest
from pydantic import ValidationError

from loadwatch.settings import LoadSettings


def test_no_option_holds_a_secret_and_the_public_options_are_all_of_them():
    # Options travel to workers and into results: a secret must never be one (credentials.py reads them).
    secretive = [n for n in LoadSettings.model_fields if any(w in n.split("_") for w in ("key", "token", "password"))]
    assert secretive == ["api_key_file"]
    options = Namespace(model="", endpoint="chat", max_tokens=64, temperature=None, ignore_eos=True,
                        api_key_file="/run/secrets/key", request_timeout=30.0, metrics_port=0, results_json="r.json",
                        slo=["ttft_p99_ms=500"], host="http://x")
    public = LoadSettings.from_options(options).public_options()
    assert public["slo"] == ["ttft_p99_ms=500"] and public["max_tokens"] == 64
    assert public["api_key_file"] == "/run/secrets/key"


def test_paths_are_not_web_ui_options():
    from loadwatch.loadgen.options import argument

    for name, field in LoadSettings.model_fields.items():
        flag, kwargs = argument(name, field)
        if "Path" in str(field.annotation) or name in ("metrics_host", "metrics_port"):
            assert kwargs.get("include_in_web_ui") is False, flag


def test_invalid_values_are_refused():
    with pytest.raises(ValidationError):
        LoadSettings(max_tokens=0)
    with pytest.raises(ValidationError):
        LoadSettings(endpoint="embeddings")
