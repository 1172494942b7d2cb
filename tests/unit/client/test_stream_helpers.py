import pytest

from loadwatch.client.stream import server_error_message, split_base_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000", ("http://127.0.0.1:8000", "")),
        ("http://127.0.0.1:8000/", ("http://127.0.0.1:8000", "")),
        ("http://127.0.0.1:8000/v1", ("http://127.0.0.1:8000", "")),
        ("https://gw.example/llm/v1/", ("https://gw.example", "/llm")),
    ],
)
def test_base_url_with_or_without_v1(url, expected):
    assert split_base_url(url) == expected


def test_server_error_message_from_openai_error_body():
    body = b'{"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400}'
    assert server_error_message(body) == "max_tokens is too large"
    assert server_error_message(b'{"error": {"message": "rate limited"}}') == "rate limited"
    assert server_error_message(b"<html>Bad gateway</html>") == "<html>Bad gateway</html>"
    assert server_error_message(b"") == "(empty body)"
