"""One stream's progress, from the bytes of its HTTP answer to the chunks of text and their arrival times.

Fed by the process's reader (client/reader.py) with each read of the stream's socket and the time of
that read, from the answer's first byte: its headers are stamped at the read that completed them, and
an answer other than 200 fails the request with its status and its body's message. TTFT ends at the
read that delivered the first chunk with text, ITL is the gap between reads that delivered text, and a
chunk without text (the role alone, usage, [DONE]) times nothing.

A read of the stream is only parsed as HTTP and noted (the body's length after it, and its time): its
events are taken out of the body later, all at once, each stamped with the read that completed it, as
it would have been had it been parsed then. A read costs a few operations instead of a pass through
the SSE decoder and the chunk's reading, and the events of a request go through them in one pass
(the per-chunk path at a thousand streams a core, benchmarks/chunk_profile.py). They are taken when the
body ends or is cut, when its request is interrupted, after CATCH_UP bytes (what a stream holds is
bounded), after a read that names an error, and after every read where a hang-up waits for a number of
chunks.

A line is bounded: geventhttpclient buffers a body without limit, so a line past `limit` bytes fails
the request as malformed instead of growing memory and CPU without end.
"""

from __future__ import annotations

from geventhttpclient.response import HTTPParseError, HTTPSocketResponse

from loadwatch.client.answer import Answer
from loadwatch.client.chunks import Usage, parse_chunk
from loadwatch.client.endpoints import Endpoint
from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.client.heard import ERROR_BODY_LIMIT, ROUTED_TO, first, refusal
from loadwatch.client.sse import DONE, SSEDecoder
from loadwatch.metrics.timing import EngineAccount, RawTiming

CATCH_UP = 1 << 16  # bytes of a body held before its events are taken out of it


class HungUp(Exception):
    """Raised while reading when the stream has had the chunks a HangUp waits for."""


class Reading:
    """What one stream has said so far; `take` after each read, `timing` once its body has ended."""

    __slots__ = ("answer", "answer_at", "arrivals", "decoder", "done", "endpoint", "engine", "finished",
                 "hang_up_after", "headers_at", "limit", "line_start", "origin", "read_at", "reads", "received",
                 "response", "routed_to", "served_by", "status", "usage")

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
        # The reads of the body not yet taken: its buffer's length after each, and when it was read.
        self.reads: list[int] = []
        self.read_at: list[float] = []
        self.line_start = 0  # in the body's buffer, where its last line starts, or before

    def cut(self, detail: str) -> RequestFailed:
        """The request's failure where its connection closed or broke: before the answer's headers had
        come, the connection failed; after a refusal's, it is that refusal, with what came of its body;
        after a 200's, the stream was cut."""
        if self.headers_at is None:
            return RequestFailed(Reason.CONNECTION, f"{self.origin}: {detail}")
        if self.status != 200:
            return refusal(self.response, bytes(self.response._body_buffer))
        try:
            self.catch_up()
        except RequestFailed as failure:  # what came before the cut had failed the request already
            return failure
        return RequestFailed(Reason.STREAM_CUT, f"after {len(self.arrivals)} chunks: {detail}")

    def take(self, data: bytes, now: float) -> bool:
        """One read of the answer, `data` (b"" where the connection closed), read at `now`; True once its
        body has ended. RequestFailed or HungUp end the request."""
        response = self.response
        try:
            response.feed(data)
        except HTTPParseError as exc:
            raise self.cut(str(exc)) from exc
        if self.headers_at is None:
            # An interim answer (100 Continue, 103 Early Hints) is followed by the final one.
            if not response.headers_complete or 100 <= response.status_code < 200:
                if not data:
                    raise self.cut("the connection closed")
                return False
            self.headers_at, self.status = now, response.status_code
            self.routed_to = first(response.get(ROUTED_TO))
        buffer = response._body_buffer
        if self.status != 200:
            if not (response.message_complete or not data or len(buffer) >= ERROR_BODY_LIMIT):
                return False  # the rest of a long error body stays unread: the connection closes with the failure
            raise refusal(response, bytes(buffer))
        self.reads.append(len(buffer))
        self.read_at.append(now)
        if response.message_complete:
            self.catch_up()
            rest = bytes(buffer)
            buffer.clear()
            self.received += len(rest)
            events = self.decoder.feed(rest) + self.decoder.close()
            self._events(events, [now] * len(events))
            return True
        if not data:
            raise self.cut("the connection closed")
        # A server's error event fails the request at the read that brought it (a stream may stall
        # after it): a read that names an error is taken at once, whatever else it holds.
        if self.hang_up_after is not None or len(buffer) >= CATCH_UP or b"error" in data:
            self.catch_up()
        elif len(buffer) - self.line_start > self.limit:
            self.line_start = buffer.rfind(b"\n") + 1
            self._bounded(len(buffer) - self.line_start)
        return False

    def catch_up(self) -> None:
        """The events of the reads noted so far, each stamped with the read that completed it."""
        if not self.reads:
            return
        buffer = self.response._body_buffer
        size = len(buffer)
        events, completed = self.decoder.take(buffer, self.reads)
        self.received += size - len(buffer)
        read_at = self.read_at
        self.reads, self.read_at, self.line_start = [], [], 0
        if events:
            self._events(events, [read_at[read] for read in completed])
        self._bounded(len(buffer))  # what is left is one line, unfinished

    def _bounded(self, line: int) -> None:
        if line > self.limit:
            raise RequestFailed(Reason.MALFORMED_CHUNK, f"a line of the stream is over {self.limit} bytes")

    def _events(self, events: list[bytes], times: list[float]) -> None:
        for data, now in zip(events, times, strict=True):
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
