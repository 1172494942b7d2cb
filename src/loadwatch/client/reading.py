"""One stream's progress, from the bytes of its HTTP answer to the chunks of text and their arrival times.

Fed by the process's reader (client/reader.py) after each read of the stream's socket, with the time
of that read, from the answer's first byte: its headers are stamped at the read that completed them,
and an answer other than 200 fails the request with its status and its body's message. TTFT ends at
the read that delivered the first chunk with text, ITL is the gap between reads that delivered text,
and a chunk without text (the role alone, usage, [DONE]) times nothing. A line is bounded:
geventhttpclient buffers a body without limit, so a line past `limit` bytes fails the request as
malformed instead of growing memory and CPU without end.
"""

from __future__ import annotations

from geventhttpclient.response import HTTPSocketResponse

from loadwatch.client.answer import Answer
from loadwatch.client.chunks import Usage, parse_chunk
from loadwatch.client.endpoints import Endpoint
from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.client.heard import ERROR_BODY_LIMIT, ROUTED_TO, first, refusal
from loadwatch.client.sse import DONE, SSEDecoder
from loadwatch.metrics.timing import EngineAccount, RawTiming


class HungUp(Exception):
    """Raised while reading when the stream has had the chunks a HangUp waits for."""


class Reading:
    """What one stream has said so far; `take` after each read, `timing` once its body has ended."""

    __slots__ = ("answer", "answer_at", "arrivals", "decoder", "done", "endpoint", "engine", "finished",
                 "hang_up_after", "headers_at", "limit", "origin", "received", "response", "routed_to", "served_by",
                 "status", "usage")

    def __init__(self, endpoint: Endpoint, response: HTTPSocketResponse, limit: int, arrivals: list[float],
                 hang_up_after: int | None, origin: str = "") -> None:
        self.endpoint, self.response, self.limit = endpoint, response, limit
        self.origin = origin  # the server, as a connection failure names it
        self.arrivals = arrivals  # the caller's: a request hung up or timed out still has its first chunk's time
        self.hang_up_after = hang_up_after
        self.decoder = SSEDecoder()
        self.answer = Answer()
        self.answer_at: float | None = None  # the first answer output, after any reasoning
        self.usage: Usage | None = None
        self.engine: EngineAccount | None = None
        self.served_by: str | None = None
        self.done = self.finished = False
        self.received = 0
        self.headers_at: float | None = None  # the read that completed the answer's headers
        self.status = 0
        self.routed_to: str | None = None  # the replica a router named in them (ROUTED_TO)

    def cut(self, detail: str) -> RequestFailed:
        """The request's failure where its connection closed or broke: before the answer's headers had
        come, the connection failed; after a refusal's, it is that refusal, with what came of its body;
        after a 200's, the stream was cut."""
        if self.headers_at is None:
            return RequestFailed(Reason.CONNECTION, f"{self.origin}: {detail}")
        if self.status != 200:
            return refusal(self.response, bytes(self.response._body_buffer))
        return RequestFailed(Reason.STREAM_CUT, f"after {len(self.arrivals)} chunks: {detail}")

    def take(self, now: float, ended: bool = False) -> bool:
        """What the response has buffered, read at `now` (`ended`: the connection closed with that
        read); True once its body has ended. RequestFailed or HungUp end the request."""
        response = self.response
        if self.headers_at is None:
            # An interim answer (100 Continue, 103 Early Hints) is followed by the final one.
            if not response.headers_complete or 100 <= response.status_code < 200:
                return False
            self.headers_at, self.status = now, response.status_code
            self.routed_to = first(response.get(ROUTED_TO))
        buffer = response._body_buffer
        if self.status != 200:
            if not (response.message_complete or ended or len(buffer) >= ERROR_BODY_LIMIT):
                return False  # the rest of a long error body stays unread: the connection closes with the failure
            raise refusal(response, bytes(buffer))
        size = len(buffer)
        events = self.decoder.take(buffer)
        self.received += size - len(buffer)
        if events:
            self._events(events, now)
        if len(buffer) > self.limit:  # what is left is one line, unfinished
            raise RequestFailed(Reason.MALFORMED_CHUNK, f"a line of the stream is over {self.limit} bytes")
        if not response.message_complete:
            return False
        rest = bytes(buffer)
        buffer.clear()
        self.received += len(rest)
        self._events(self.decoder.feed(rest) + self.decoder.close(), now)
        return True

    def _events(self, events: list[bytes], now: float) -> None:
        for data in events:
            if self.done:
                continue  # nothing after [DONE] counts
            if data == DONE:
                self.done = True
                continue
            chunk = parse_chunk(data, self.endpoint)
            if chunk.has_text:
                self.arrivals.append(now)
                if self.hang_up_after is not None and len(self.arrivals) >= self.hang_up_after:
                    raise HungUp
                if self.answer_at is None and chunk.has_answer:
                    self.answer_at = now
            self.answer.add(chunk)
            if chunk.usage is not None and chunk.usage.completion_tokens is not None:
                # vLLM's account and its fingerprint ride on its usage chunk
                self.usage, self.engine, self.served_by = chunk.usage, chunk.engine, chunk.fingerprint
            self.done = self.done or chunk.final
            self.finished = self.finished or chunk.finished

    def timing(self, t0: float, wants_usage: bool) -> tuple[RawTiming, bool]:
        """The request's timing once its body has ended, and whether it ended without `[DONE]`. One
        whose body ends without `[DONE]` is still complete after its finish_reason, and its usage where
        it was asked for (SGLang's and others' streams, kept or proxied, may lack the marker; `vllm bench
        serve` takes the body's end as the end). One that ends before then was cut."""
        arrivals, usage = self.arrivals, self.usage
        without_done = not self.done and self.finished and (usage is not None or not wants_usage)
        if not self.done and not without_done:
            last = "response.completed" if self.endpoint == "responses" else "[DONE]"
            what = "its usage" if self.finished else f"{last} or a finish_reason"
            raise RequestFailed(Reason.STREAM_CUT, f"stream ended before {what} after {len(arrivals)} chunks")
        if not arrivals or (usage is not None and usage.completion_tokens == 0):
            raise RequestFailed(Reason.EMPTY_COMPLETION, "the stream carried no generated text")
        usage = usage or Usage(None, None)
        return RawTiming(t0, tuple(arrivals), usage.prompt_tokens, usage.completion_tokens, self.headers_at,
                         self.answer_at, usage.cached_tokens, usage.reasoning_tokens, self.answer.tool_calls,
                         self.engine, served_by=self.served_by), without_done
