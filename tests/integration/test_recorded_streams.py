"""Streams as servers really send them, through the real client (issue 41).

Every recorded stream in `../shared/real/` (others' data, read in place and skipped where that
folder is absent, as on a user's clone) and our own samples, which always run, are sent by a server
that replays them: an `sse-raw-*` file byte for byte, a chunk list (`sse-chunks-*`, its SSE framing
stripped by the tool that recorded it) as `data: <chunk>` events and then `data: [DONE]`.

The server pauses before the event that carries the first generated output (text, reasoning or a
tool call's arguments, as this test finds it on its own) and again after it: TTFT must fall
between the two pauses, or the client took another event for the first. The output tokens must be
the usage's, where the stream has one; no field the client does not know may fail a request; and a
stream that ends after its finish_reason without `[DONE]` is complete, and said to be.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from loadwatch.client.stream import Streamer
from loadwatch.settings import LoadSettings
from tests.conftest import REPO

REAL = REPO.parent / "shared" / "real"
PAUSE = 0.3  # seconds before the first output event, and again after it
OUTPUT_KEYS = {"content", "text", "reasoning_content", "reasoning", "arguments", "delta"}

# Our own, so that the rule holds where ../shared/real is absent: a stream that ends after its
# finish_reason and usage without [DONE] (as SGLang's, proxied, may), and one cut before its end.
CHUNK = '{"choices":[{"index":0,"delta":{"content":%s},"finish_reason":%s}]%s}'
OWN = {
    "own-chat-no-done.txt": "".join(f"data: {c}\n\n" for c in (
        CHUNK % ('""', "null", ""), CHUNK % ('"Hello"', "null", ""), CHUNK % ('" there"', "null", ""),
        CHUNK % ("null", '"stop"', ',"usage":{"prompt_tokens":3,"completion_tokens":2}'))),
    "own-chat-cut.txt": "".join(f"data: {c}\n\n" for c in (
        CHUNK % ('"Hello"', "null", ""), CHUNK % ('" there"', "null", ""))),
}


def recorded() -> list[str]:
    return sorted(p.name for p in REAL.glob("sse-*")) if REAL.is_dir() else []


def events(name: str) -> list[str]:
    """The stream as the server sends it, an event at a time (each with its blank line)."""
    if name in OWN:
        text = OWN[name]
    else:
        text = (REAL / name).read_text()
    if name.startswith("sse-chunks-"):
        chunks = json.loads(text) if name.endswith(".json") else [line for line in text.splitlines() if line.strip()]
        return [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return [block + "\n\n" for block in text.split("\n\n") if block.strip()]


def payloads(event: str) -> list[object]:
    return [json.loads(line[5:]) for line in event.splitlines()
            if line.startswith("data:") and line[5:].strip() != "[DONE]"]


def has_output(obj: object) -> bool:
    if isinstance(obj, dict):
        return any((k in OUTPUT_KEYS and isinstance(v, str) and v) or has_output(v) for k, v in obj.items())
    return isinstance(obj, list) and any(has_output(v) for v in obj)


def usage_tokens(sent: list[str]) -> int | None:
    """The output tokens of the stream's last usage: chat and completions' `usage`, the Responses
    API's `response.usage` on its response.completed, which ends the stream (a recording may hold
    several responses one after another)."""
    found = None
    for event in sent:
        for obj in payloads(event):
            if not isinstance(obj, dict):
                continue
            usage = obj.get("usage") or (obj.get("response") or {}).get("usage")
            if isinstance(usage, dict):
                tokens = usage.get("completion_tokens", usage.get("output_tokens"))
                found = tokens if tokens is not None else found
            if obj.get("type") == "response.completed":
                return found
    return found


def endpoint_of(name: str) -> str:
    if "responses" in name:
        return "responses"
    return "completions" if "completions" in name and "chat" not in name else "chat"


@pytest.fixture
def replay():
    """A server that sends the stream of the test's choosing to every POST."""
    plan: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i, event in enumerate(plan["events"]):
                if i in (plan["first"], plan["first"] + 1):
                    self.wfile.flush()
                    time.sleep(PAUSE)
                self.wfile.write(event.encode())
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, plan
    server.shutdown()
    server.server_close()


def send(replay, name: str):
    server, plan = replay
    sent = events(name)
    first = next((i for i, event in enumerate(sent) if any(has_output(o) for o in payloads(event))), None)
    assert first is not None, f"{name}: no generated output found in it"
    plan.update(events=sent, first=first)
    streamer = Streamer(f"http://127.0.0.1:{server.server_address[1]}", None, 30.0, LoadSettings().max_line_bytes)
    try:
        payload = {"model": "m", "max_tokens": 10, "stream": True, "stream_options": {"include_usage": True}}
        return streamer.stream(endpoint_of(name), payload), sent
    finally:
        streamer.close()


@pytest.mark.parametrize("name", recorded() or [pytest.param("-", marks=pytest.mark.skip(
    reason=f"{REAL} is absent: others' recorded streams are read in place, never copied here"))])
def test_every_recorded_stream_is_timed_at_its_first_output_and_counted_by_its_usage(replay, name):
    result, sent = send(replay, name)
    assert result.failure is None, f"{name}: {result.failure.reason}: {result.failure}"
    timing = result.timing
    ttft = timing.content_arrivals[0] - timing.t0
    assert PAUSE - 0.01 <= ttft < 2 * PAUSE - 0.05, f"{name}: TTFT {ttft:.3f} s is not at its first output"
    expected = usage_tokens(sent)
    if expected is not None:
        assert timing.completion_tokens == expected, name
    assert result.without_done == (not any("[DONE]" in e for e in sent) and endpoint_of(name) != "responses"), name


def test_a_stream_that_ends_after_its_finish_reason_and_usage_is_complete_without_done(replay):
    result, _ = send(replay, "own-chat-no-done.txt")
    assert result.failure is None and result.without_done and result.timing.completion_tokens == 2


def test_a_stream_that_ends_before_its_finish_reason_is_cut(replay):
    result, _ = send(replay, "own-chat-cut.txt")
    assert result.failure is not None and result.failure.reason == "stream_cut", result.failure
    assert "before [DONE] or a finish_reason" in str(result.failure)
