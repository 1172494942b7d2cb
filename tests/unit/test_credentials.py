import argparse
import base64

import pytest

from loadwatch.credentials import (
    CredentialError,
    authorization,
    read_secret,
    redact_url,
    refused_on_command_line,
    split_credentials,
)


def test_a_secret_comes_from_its_file_first_then_the_file_variable_then_the_variable(tmp_path):
    given, named = tmp_path / "given", tmp_path / "named"
    given.write_text("from-option\n")
    named.write_text("  from-file-variable\n")
    environ = {"KEY": "from-variable", "KEY_FILE": str(named)}
    assert read_secret("KEY", given, environ) == "from-option"
    assert read_secret("KEY", None, environ) == "from-file-variable"
    assert read_secret("KEY", None, {"KEY": "from-variable"}) == "from-variable"
    assert read_secret("KEY", None, {"KEY": ""}) is None


@pytest.mark.parametrize("content, reason", [(None, "No such file"), ("\n", "is empty")])
def test_an_unreadable_or_empty_file_is_an_error_that_names_it_but_not_its_content(tmp_path, content, reason):
    path = tmp_path / "key"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CredentialError, match=reason) as info:
        read_secret("OPENAI_API_KEY", path, {})
    assert str(path) in str(info.value)


@pytest.mark.parametrize("url, shown", [
    ("http://user:s3cret@host:8000/v1", "http://***@host:8000/v1"),
    ("https://tok@host", "https://***@host"),
    ("http://host:8000", "http://host:8000"),
    ("", ""),
])
def test_urls_are_shown_without_their_credentials(url, shown):
    assert redact_url(url) == shown


def test_url_credentials_become_a_basic_header_and_leave_the_url():
    url, header = split_credentials("http://al%40ice:p%3Ass@127.0.0.1:8000/v1")
    assert url == "http://127.0.0.1:8000/v1"
    assert base64.b64decode(header.removeprefix("Basic ")) == b"al@ice:p:ss"
    assert split_credentials("http://h:1") == ("http://h:1", None)
    assert authorization("sk-1", header) == "Bearer sk-1"  # the API key wins
    assert authorization(None, header) == header and authorization(None, None) is None


def test_a_secret_flag_is_refused_with_where_to_put_it_instead(capsys):
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--token", action=refused_on_command_line("Use $TOKEN."))
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--token", "sk-visible"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--token is refused" in err and "Use $TOKEN." in err and "sk-visible" not in err
