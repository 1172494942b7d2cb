"""One stream's progress, from the bytes of its HTTP body to the chunks of text and their arrival times.

Fed by the process's reader (client/reader.py) after each read of the stream's socket, with the time
of that read: TTFT ends at the read that delivered the first chunk with text, ITL is the gap between
reads that delivered text, and a chunk without text (the role alone, usage, [DONE]) times nothing.
A line is bounded: geventhttpclient buffers a body without limit, so a line past `limit` bytes
fails the request as malformed instead of growing memory and CPU without end.
"""

from __future__ import annotations

from geventhttpclient.response import HTTPSocketResponse

from loadwatch.client.answer import Answer
from loadwatch.client.chunks import Usage, parse_chunk
from loadwatch.client.endpoints import Endpoint
from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.client.sse import DONE, SSEDecoder
from loadwatch.metrics.timing import EngineAccount, RawTiming


class HungUp(Exception):
    """Raised while reading when the stream has had the chunks a HangUp waits for."""


class Reading:
    """What one stream has said so far; `take` after each read, `timing` once its body has ended."""

    __slots__ = ("answer", "answer_at", "arrivals", "decoder", "done", "endpoint", "engine", "finished",
                 "hang_up_after", "limit", "received", "response", "served_by", "usage")

    def __init__(self, endpoint: Endpoint, response: HTTPSocketResponse, limit: int, arrivals: list[float],
                 hang_up_after: int | None) -> None:
        self.endpoint, self.response, self.limit = endpoint, response, limit
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

    def take(self, now: float) -> bool:
        """The complete lines the response has buffered, read at `now`; True once its body has ended.
        RequestFailed or HungUp end the request."""
        response = self.response
        buffer = response._body_buffer
        at = buffer.rfind(b"\n")
        if at >= 0:
            if at == len(buffer) - 1:  # as a read mostly ends: at the end of an event
                lines = bytes(buffer)
                buffer.clear()
            else:
                lines = bytes(buffer[: at + 1])
                del buffer[: at + 1]
            self.received += len(lines)
            self._events(self.decoder.feed(lines), now)
        elif len(buffer) > self.limit:
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

    def timing(self, t0: float, headers_at: float, wants_usage: bool) -> tuple[RawTiming, bool]:
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
        return RawTiming(t0, tuple(arrivals), usage.prompt_tokens, usage.completion_tokens, headers_at, self.answer_at,
                         usage.cached_tokens, usage.reasoning_tokens, self.answer.tool_calls, self.engine,
                         served_by=self.served_by), without_done
