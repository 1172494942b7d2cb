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
    from loadwatch.locust_options import argument

    for name, field in LoadSettings.model_fields.items():
        flag, kwargs = argument(name, field)
        if "Path" in str(field.annotation) or name in ("metrics_host", "metrics_port"):
            assert kwargs.get("include_in_web_ui") is False, flag


def test_invalid_values_are_refused():
    with pytest.raises(ValidationError):
        LoadSettings(max_tokens=0)
    with pytest.raises(ValidationError):
        LoadSettings(endpoint="images")
    with pytest.raises(ValidationError, match="needs a streamed endpoint: embeddings sends no tokens"):
        LoadSettings(endpoint="embeddings", cancel_ratio=0.5, cancel_after_tokens=2)
    with pytest.raises(ValidationError):
        LoadSettings(endpoint="rerank", inputs_per_request=0)


def test_extra_body_is_a_json_object_that_leaves_loadwatchs_own_fields_alone():
    settings = LoadSettings(extra_body='{"top_k": 5, "chat_template_kwargs": {"enable_thinking": false}}')
    assert settings.extra_body == {"top_k": 5, "chat_template_kwargs": {"enable_thinking": False}}
    with pytest.raises(ValidationError, match="not JSON"):
        LoadSettings(extra_body="{top_k: 5")
    with pytest.raises(ValidationError, match="max_tokens, stream: set by loadwatch"):
        LoadSettings(extra_body='{"stream": false, "max_tokens": 3}')


def test_headers_are_name_value_pairs_with_no_credential_and_their_values_stay_out_of_the_results():
    settings = LoadSettings(header=["X-Tenant: blue", "X-Trace: a,b"])
    assert settings.headers() == {"X-Tenant": "blue", "X-Trace": "a,b"}
    assert settings.public_options()["header"] == ["X-Tenant: ***", "X-Trace: ***"]
    with pytest.raises(ValidationError, match="not NAME:VALUE"):
        LoadSettings(header=["X-Tenant"])
    with pytest.raises(ValidationError, match="Authorization is not given on the command line"):
        LoadSettings(header=["Authorization: Bearer sk-1"])


def test_no_loadwatch_variable_sets_an_option_behind_the_users_back(monkeypatch):
    monkeypatch.setenv("LOADWATCH_DATASET", "random")
    monkeypatch.setenv("LOADWATCH_MAX_TOKENS", "7")
    settings = LoadSettings()
    assert (settings.dataset, settings.max_tokens) == ("builtin", 128)


@pytest.mark.parametrize("options, why", [
    ({"cancel_ratio": 0.3}, "needs one of --cancel-after SECONDS or --cancel-after-tokens N"),
    ({"cancel_ratio": 0.3, "cancel_after": 1.0, "cancel_after_tokens": 4}, "needs one of"),
    ({"cancel_after_tokens": 4}, "need --cancel-ratio R"),
    ({"cancel_ratio": 1.5, "cancel_after": 1.0}, "less than or equal to 1"),
])
def test_a_share_of_hang_ups_needs_one_moment_to_hang_up(options, why):
    with pytest.raises(ValueError, match=why):
        LoadSettings(**options)


def test_a_split_is_given_shares_or_zipfs_over_the_names_in_their_order():
    assert LoadSettings(model="a=0.7,b=0.3").models() == [("a", 0.7), ("b", 0.3)]
    assert LoadSettings(model="a,b").models() == [("a", 1.0), ("b", 1.0)]  # no skew: even
    assert LoadSettings(model="lora-1,lora-2,lora-3,lora-4", model_skew=1.0).models() == [
        ("lora-1", 1.0), ("lora-2", 0.5), ("lora-3", pytest.approx(1 / 3)), ("lora-4", 0.25)]
    assert LoadSettings(model="tiny").models() == []
    with pytest.raises(ValidationError, match="mixes NAME=SHARE with bare names"):
        LoadSettings(model="a=1,b")
