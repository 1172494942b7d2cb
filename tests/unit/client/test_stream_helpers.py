import pytest
from geventhttpclient import HTTPClient

from loadwatch.client.heard import server_error_message
from loadwatch.client.stream import USER_AGENT, request_head, split_base_url


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


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://[::1]:8000", "https://gw.example", "http://h:80"])
def test_a_streams_request_head_has_the_lines_geventhttpclient_writes(url):
    # A stream's request is written by loadwatch; the other requests by geventhttpclient's request().
    client = HTTPClient.from_url(url, headers={"User-Agent": USER_AGENT})
    fields = {"Authorization": "Bearer k", "Content-Type": "application/json", "Accept": "text/event-stream"}
    theirs = client._build_request("POST", "/v1/chat/completions", body=b"{}", headers=fields)
    ours = (b"POST /v1/chat/completions HTTP/1.1\r\n" + request_head(client.host, client.port, fields) +
            b"Content-Length: 2\r\n\r\n").decode("latin-1")
    assert sorted(ours.split("\r\n")) == sorted(theirs.split("\r\n"))


def test_a_header_given_stands_for_the_default_and_one_that_cannot_be_sent_is_refused():
    head = request_head("h", 8000, {"user-agent": "mine/1"}).decode()
    assert "user-agent: mine/1\r\n" in head and USER_AGENT not in head
    for bad in ({"X Bad": "1"}, {"X-Id": "a\r\nInjected: 1"}):
        with pytest.raises(ValueError, match="cannot send the header"):
            request_head("h", 8000, bad)


def test_of_one_name_in_any_case_the_last_is_sent_and_the_length_and_id_are_loadwatchs():
    fields = {"content-type": "text/plain", "X-Request-Id": "mine", "Content-Length": "9",
              "Content-Type": "application/json"}
    lines = request_head("h", 8000, fields).decode().split("\r\n")
    assert [line for line in lines if line.lower().startswith("content-type")] == ["Content-Type: application/json"]
    assert not [line for line in lines if line.lower().startswith(("content-length", "x-request-id"))]
