"""A fake OpenAI-compatible streaming server with exact, known timing and faults on demand.

Only for tests that need a known truth (TTFT/ITL calibration) or a fault that a real vLLM does
not produce on request. Each content chunk is sent on an absolute schedule from the request's
arrival: first at +TTFT, then every ITL, so the schedule does not drift under load.

    python tests/sse_server.py --port 0 --ttft 0.1 --itl 0.02 --tokens 20 --fault http_500=11

Prints `listening on PORT` when ready. GET /stats returns what it did: outcomes, and the median TTFT
(first content write minus the arrival of the request's first byte) and TPOT it really produced, its
own lag (how late its content chunks went out against their schedule), its longest pass over the
schedule (how long, how many chunks) and its mean stream (arrival to last chunk); GET
/stats/arrivals the arrival times, /stats/arrived-at each X-Request-Id's wall-clock arrival,
/stats/ttft-by-user the true TTFT of each request that named a `user`. It speaks just enough
HTTP/1.1 by hand (keep-alive, Content-Length bodies, chunked responses) to stamp a request's first
byte and write each chunk synchronously: an HTTP framework adds about a millisecond of its own
between the two, which is the size of the error under test.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import heapq
import itertools
import json
import math
import ssl
import statistics
import time
from collections import Counter

FAULTS = ("connection", "http_500", "http_429", "stream_cut", "malformed_chunk", "empty_completion",
          "stream_error", "timeout", "http_400", "http_503", "huge_error", "non_utf8", "delta_string",
          "tokens_string", "endless_line", "error_null", "no_usage", "stall_first", "stall_mid", "no_done")
# What the load generator must record for each fault: a failure reason, or None for a success.
EXPECTED = {"connection": "connection", "http_500": "http_500", "http_429": "http_429", "stream_cut": "stream_cut",
            "malformed_chunk": "malformed_chunk", "empty_completion": "empty_completion",
            "stream_error": "stream_error", "timeout": "timeout", "http_400": "http_400", "http_503": "http_503",
            "huge_error": "http_500", "non_utf8": "malformed_chunk", "delta_string": "malformed_chunk",
            "tokens_string": "malformed_chunk", "endless_line": "malformed_chunk", "error_null": None,
            "no_usage": None, "stall_first": "timeout", "stall_mid": "timeout", "no_done": None}


API_OF = {"/v1/chat/completions": "chat", "/v1/completions": "completions", "/v1/responses": "responses"}


def sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def event(obj: dict) -> bytes:
    """One event of the Responses API, as vLLM writes it: its type named twice."""
    return f"event: {obj['type']}\n".encode() + sse(obj)


def response_event(kind: str, **fields: object) -> bytes:
    return event({"type": kind, "sequence_number": 0, **fields})


def role_chunk(model: str, tool_calls: bool) -> dict:
    """The role's chunk; an agent's model names the function at once, before any argument (not yet output)."""
    delta: dict = {"role": "assistant", "content": ""}
    if tool_calls:
        delta = {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}
    return {"id": "x", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def framed(data: bytes) -> bytes:
    """One chunk of a chunked HTTP body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def content_chunk(model: str, text: str, completions: bool, tool: bool = False, reasoning: bool = False) -> dict:
    if completions:
        choice = {"index": 0, "text": text, "finish_reason": None}
    elif tool:  # an agent's model: the output is a tool call's arguments, streamed
        choice = {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": text}}]},
                  "finish_reason": None}
    else:  # a reasoning model thinks first (vLLM's reasoning parser names it reasoning_content)
        choice = {"index": 0, "delta": {"reasoning_content" if reasoning else "content": text}, "finish_reason": None}
    return {"id": "x", "object": "chat.completion.chunk", "model": model, "choices": [choice]}


LATE = 0.005  # a chunk sent this much after its schedule is late: the server fell behind

TEMPLATE_TOKENS = 3  # what /tokenize's chat template adds around the messages


def tokenize(request: dict, max_model_len: int) -> dict:
    """vLLM's /tokenize with a tokenizer of a word a token (so texts of a length compose exactly)."""
    if "messages" in request:
        words = sum(len(str(m.get("content") or "").split()) for m in request["messages"]) + TEMPLATE_TOKENS
    else:
        words = len(str(request.get("prompt") or "").split())
    return {"count": words, "max_model_len": max_model_len, "tokens": list(range(words))}


class Stats:
    def __init__(self) -> None:
        self.arrivals = 0
        self.outcomes: Counter[str] = Counter()
        self.true_ttft: list[float] = []
        self.true_tpot: list[float] = []
        self.ttft_by_user: dict[str, float] = {}  # requests that name a `user`, for pairing
        self.arrival_times: list[float] = []
        self.request_ids: list[str | None] = []  # the X-Request-Id of each completion request
        self.arrived_at: dict[str, float] = {}  # X-Request-Id -> wall-clock time it came (this host's clock)
        self.last_request: dict = {}  # the headers and body of the last completion request
        self.models: Counter[str] = Counter()  # completion requests by the model they asked for
        self.true_ttfa: list[float] = []  # to the first answer token, after the reasoning ones
        self.true_e2e: list[float] = []  # of embeddings and rerank answers
        self.pooled_tokens = 0  # the prompt tokens their usage counted
        self.images: list[bytes] = []  # every image a chat request carried, decoded
        self.prompts: list[str] = []  # the text of every completion request's last message or prompt
        # Its own lag: how late each content chunk went out against its schedule (a server that falls
        # behind delivers less than its timing promises, and a benchmark must not charge the client).
        self.lag: list[float] = []
        self.streamed: list[float] = []  # each completed stream's arrival to its last content chunk, as sent
        # Its longest pass over the schedule: how long it took and how many chunks it wrote. Where the
        # server is late, this says how: one long pass (on a copy timed write by write, mostly its
        # writes slowing) holds back every chunk due during it, and the next has that many more to write.
        self.longest_pass = (0.0, 0)
        self.connections = 0  # accepted: a client that keeps its connections makes one a user

    def as_json(self) -> dict:
        def median_ms(values: list[float]) -> float | None:
            return 1000 * statistics.median(values) if values else None

        def p99_ms(values: list[float]) -> float | None:
            return 1000 * statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 else None

        return {"arrivals": self.arrivals, "outcomes": dict(self.outcomes), "connections": self.connections,
                "median_ttft_ms": median_ms(self.true_ttft), "median_tpot_ms": median_ms(self.true_tpot),
                "p99_ttft_ms": p99_ms(self.true_ttft), "median_ttfa_ms": median_ms(self.true_ttfa),
                "models": dict(self.models),
                "median_e2e_ms": median_ms(self.true_e2e), "p99_e2e_ms": p99_ms(self.true_e2e),
                "pooled": len(self.true_e2e), "pooled_tokens": self.pooled_tokens,
                "images": len(self.images), "image_bytes": sum(len(i) for i in self.images),
                "distinct_images": len(set(self.images)), "distinct_prompts": len(set(self.prompts)),
                "chunks_sent": len(self.lag),
                "mean_stream_ms": 1000 * statistics.fmean(self.streamed) if self.streamed else None,
                "longest_pass_ms": 1000 * self.longest_pass[0], "longest_pass_chunks": self.longest_pass[1],
                "lag_median_ms": median_ms(self.lag), "lag_p99_ms": p99_ms(self.lag),
                "late_share": sum(lag > LATE for lag in self.lag) / len(self.lag) if self.lag else None}


class Config:
    def __init__(self, args: argparse.Namespace) -> None:
        self.ttft, self.itl, self.tokens, self.stall = args.ttft, args.itl, args.tokens, args.stall
        self.retry_after = args.retry_after
        self.authorization = args.authorization
        self.tool_calls = args.tool_calls
        self.no_responses = args.no_responses
        self.reasoning, self.cached_tokens = args.reasoning, args.cached_tokens
        # A server of known capacity: at most this many streams at once, the others wait their turn.
        self.slots = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None
        self.max_concurrency = args.max_concurrency
        self.vllm_metrics = args.vllm_metrics
        self.max_model_len = args.max_model_len
        self.served = args.served.split(",")  # the model ids /v1/models lists (a base model and its adapters)
        # A fleet behind a round-robin router, as its answers show it: each answer's system_fingerprint
        # names the next replica in turn.
        self.fingerprints = itertools.cycle(args.fingerprints.split(",")) if args.fingerprints else None
        self.running = self.waiting = self.finished = self.generated = 0
        self.framed: dict[tuple, list[bytes]] = {}  # frames(): a plain stream's writes, built once
        self.faults: dict[str, int] = {}
        for item in args.fault:
            name, _, every = item.partition("=")
            if name not in FAULTS:
                raise SystemExit(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
            self.faults[name] = int(every)

    def token(self, model: str, api: str, i: int, n: int) -> dict:
        """Token i's chunk of n."""
        chunk = content_chunk(model, f"tok{i} ", api == "completions", self.tool_calls, i < self.reasoning)
        if i == n - 1:  # as vLLM says it, on the last token's chunk
            chunk["choices"][0]["finish_reason"] = "length"
        return chunk

    def frames(self, model: str, api: str) -> list[bytes]:
        """A plain stream's token chunks as written on the wire, built once per model and API: the
        first carries the role's chunk before it, as vLLM sends the role with the first token (an
        agent's went out with the headers)."""
        key = (model, api)
        frames = self.framed.get(key)
        if frames is None:
            frames = [framed(sse(self.token(model, api, i, self.tokens))) for i in range(self.tokens)]
            if not self.tool_calls:
                frames[0] = framed(sse(role_chunk(model, False))) + frames[0]
            self.framed[key] = frames
        return frames

    def fault_for(self, n: int) -> str | None:
        return next((name for name, every in self.faults.items() if every and n % every == 0), None)


class Stream:
    """A plain stream on the schedule: its next token, and when each went out."""

    __slots__ = ("connection", "request", "api", "frames", "start", "i", "sent", "done")

    def __init__(self, connection: Connection, request: dict, api: str, frames: list[bytes], start: float) -> None:
        self.connection, self.request, self.api = connection, request, api
        self.frames, self.start = frames, start  # start: its first token's due time
        self.i = 0
        self.sent: list[float] = []
        self.done = connection.loop.create_future()  # True when its last chunk is out, False when its client left


class Schedule:
    """Every plain stream's tokens on one timeline, woken once a tick: one timer for the next token
    due, and each wake-up writes all the tokens then due, across streams, in one pass. A coroutine a
    stream that slept before each token cost a timer and a task step a token, and at a thousand
    streams one core fell behind by tens of milliseconds (p99)."""

    def __init__(self, config: Config, stats: Stats, grain: float) -> None:
        self.config, self.stats = config, stats
        # uvloop counts its time and its timers in whole milliseconds, and wakes a timer up to half of
        # one early: a token due within that goes out now, or it would wait a tick more.
        self.grain = grain
        self.due: list[tuple[float, int, Stream]] = []  # a heap by due time
        self.order = itertools.count()  # equal due times in turn, never comparing streams
        self.timer: asyncio.Handle | None = None
        self.armed = math.inf  # when the timer wakes (uvloop's handles do not say)

    def add(self, stream: Stream) -> None:
        heapq.heappush(self.due, (stream.start, next(self.order), stream))
        if stream.start < self.armed:
            self._arm()

    def _arm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.armed = None, math.inf
        if self.due:
            self.armed = self.due[0][0]
            self.timer = asyncio.get_running_loop().call_at(self.armed, self._tick)

    def _tick(self) -> None:
        loop, due, itl, lag = asyncio.get_running_loop(), self.due, self.config.itl, self.stats.lag
        began, written = time.perf_counter(), len(lag)
        ready = loop.time() + self.grain
        while due and due[0][0] <= ready:
            when, _, stream = heapq.heappop(due)
            connection = stream.connection
            if connection.transport.is_closing():  # its client left: dropped from the schedule
                stream.done.set_result(False)
                continue
            last = stream.i == len(stream.frames) - 1
            # The last token's chunk, its usage, [DONE] and the body's end go out in one write.
            data = stream.frames[stream.i]
            connection.transport.write(data + connection.tail(stream.request, stream.api, stream.i + 1, None)
                                       if last else data)
            stream.sent.append(loop.time())
            lag.append(stream.sent[-1] - when)
            stream.i += 1
            if last:
                stream.done.set_result(True)
            else:
                heapq.heappush(due, (stream.start + stream.i * itl, next(self.order), stream))
        took = time.perf_counter() - began
        if took > self.stats.longest_pass[0]:
            self.stats.longest_pass = (took, len(lag) - written)
        self.timer = None
        self._arm()


class Connection(asyncio.Protocol):
    def __init__(self, config: Config, stats: Stats, schedule: Schedule) -> None:
        self.config, self.stats, self.schedule = config, stats, schedule
        self.loop = asyncio.get_running_loop()
        self.buffer = b""
        self.arrival: float | None = None
        self.busy = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.stats.connections += 1

    def data_received(self, data: bytes) -> None:
        if self.arrival is None:
            self.arrival = self.loop.time()
        self.buffer += data
        if not self.busy:
            self._next_request()

    def _next_request(self) -> None:
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self.buffer[:head_end].decode("latin-1").split("\r\n")
        method, path, _ = head[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:])}
        length = int(headers.get("content-length", 0))
        if len(self.buffer) < head_end + 4 + length:
            return
        body = self.buffer[head_end + 4: head_end + 4 + length]
        self.buffer = self.buffer[head_end + 4 + length:]
        arrival, self.arrival = self.arrival, (self.loop.time() if self.buffer else None)
        self.busy = True
        if self.config.authorization and path.startswith("/v1/") \
                and headers.get("authorization") != self.config.authorization:
            self._respond(401, {"error": "Unauthorized"})  # as vLLM's --api-key answers
            self._next_request()
            return
        if method == "POST" and (path.startswith("/v1/") or path == "/rerank"):
            self.stats.request_ids.append(headers.get("x-request-id"))
            if headers.get("x-request-id"):
                self.stats.arrived_at[headers["x-request-id"]] = time.time()
            self.stats.last_request = {"headers": headers, "body": json.loads(body or b"{}")}
        self.loop.create_task(self._serve(method, path, body, arrival))

    def _respond(self, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        self._respond_raw(status, body)

    def _respond_raw(self, status: int, body: bytes, extra: str = "") -> None:
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
                  500: "Internal Server Error", 503: "Service Unavailable"}[status]
        self.transport.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n".encode() + body
        )

    def _chunk(self, data: bytes) -> None:
        self.transport.write(framed(data))

    async def _serve(self, method: str, path: str, body: bytes, arrival: float) -> None:
        try:
            if method == "GET" and path == "/health":  # as vLLM answers it: the peers' tools ask before a run
                self._respond_raw(200, b"")
            elif method == "GET" and path == "/v1/models":
                listed = [{"id": model, "object": "model"} for model in self.config.served]
                self._respond(200, {"object": "list", "data": listed})
            elif method == "GET" and path == "/metrics" and self.config.vllm_metrics:
                self._respond_raw(200, vllm_metrics(self.config).encode())
            elif method == "GET" and path == "/stats":
                self._respond(200, self.stats.as_json())
            elif method == "GET" and path == "/stats/arrivals":
                self._respond(200, self.stats.arrival_times)
            elif method == "GET" and path == "/stats/ttft-by-user":
                self._respond(200, self.stats.ttft_by_user)
            elif method == "GET" and path == "/stats/request-ids":
                self._respond(200, self.stats.request_ids)
            elif method == "GET" and path == "/stats/arrived-at":
                self._respond(200, self.stats.arrived_at)
            elif method == "GET" and path == "/stats/last-request":
                self._respond(200, self.stats.last_request)
            elif method == "POST" and path == "/tokenize" and self.config.max_model_len:
                self._respond(200, tokenize(json.loads(body), self.config.max_model_len))
            elif method == "POST" and path in ("/v1/embeddings", "/rerank"):
                await self._pool(json.loads(body), path, arrival)
            elif method == "POST" and path in API_OF \
                    and not (path == "/v1/responses" and self.config.no_responses):
                api = API_OF[path]
                config = self.config
                if config.slots is not None:
                    config.waiting += 1
                    async with config.slots:
                        config.waiting -= 1
                        config.running += 1
                        # The stream's timing starts once it has a slot; its true TTFT still counts the wait.
                        waited = self.loop.time() - arrival
                        try:
                            done = await self._complete(json.loads(body), api, arrival + waited, arrival)
                        finally:
                            config.running -= 1
                else:
                    done = await self._complete(json.loads(body), api, arrival)
                config.finished += 1
                if not done:
                    return
            else:
                self._respond(404, {"error": {"message": f"no route {method} {path}"}})
        except (ConnectionError, RuntimeError):
            return
        self.busy = False
        if self.buffer:
            self._next_request()

    async def _pool(self, request: dict, path: str, arrival: float) -> None:
        """An embeddings or rerank answer, whole, --ttft after the request came: a vector per text, a
        score per document, and usage counting a token per word, as one answer of vLLM's."""
        await asyncio.sleep(max(0.0, arrival + self.config.ttft - self.loop.time()))
        texts = request["input"] if path == "/v1/embeddings" else [request["query"], *request["documents"]]
        texts = [texts] if isinstance(texts, str) else texts  # one text, as vllm bench serve sends it
        tokens = sum(len(t.split()) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        if path == "/v1/embeddings":
            answer = {"object": "list", "data": [{"index": i, "object": "embedding", "embedding": [0.5] * 8}
                                                 for i in range(len(texts))], "usage": usage}
        else:
            answer = {"id": "rerank-x", "results": [{"index": i, "document": {"text": d}, "relevance_score": 0.5}
                                                    for i, d in enumerate(request["documents"])], "usage": usage}
        self._respond(200, answer)
        self.stats.true_e2e.append(self.loop.time() - arrival)
        self.stats.pooled_tokens += usage["prompt_tokens"]

    async def _complete(self, request: dict, api: str, arrival: float, came: float | None = None) -> bool:
        """Stream one completion timed from `arrival` (when it got its slot); `came`, when it waited for
        one, is when it really arrived. False when the connection was closed on purpose. `api`: chat,
        completions or responses (its events as vLLM sends them; the faults are chat's)."""
        stats, config = self.stats, self.config
        came = arrival if came is None else came
        stats.arrivals += 1
        messages = request.get("messages") or []
        prompt = messages[-1]["content"] if messages else request.get("prompt") or request.get("input")
        stats.prompts.append(str(prompt))
        for message in messages:  # images in content parts, as vLLM takes them
            for part in message["content"] if isinstance(message["content"], list) else []:
                if part["type"] == "image_url":
                    stats.images.append(base64.b64decode(part["image_url"]["url"].partition(",")[2]))
        stats.arrival_times.append(came)
        fault = config.fault_for(stats.arrivals)
        if fault:
            stats.outcomes[fault] += 1
        if fault == "connection":
            self.transport.close()
            return False
        if fault in ("http_500", "http_429", "http_400", "http_503"):
            status = int(fault[5:])
            body = json.dumps({"error": {"message": f"injected {status}", "code": status}}).encode()
            self._respond_raw(status, body, f"Retry-After: {config.retry_after:g}\r\n" if status in (429, 503) else "")
            return True
        if fault == "huge_error":  # 50 MB: the client must read a bounded part and hang up
            self._respond_raw(500, b'{"error": {"message": "' + b"x" * 50_000_000 + b'"}}')
            return True
        if fault == "stall_first":  # not even the response headers
            await asyncio.sleep(config.stall)
            self.transport.close()
            return False
        model = request.get("model", "fake-model")
        stats.models[model] += 1
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
        if fault == "timeout":  # headers and the role chunk, then nothing
            self._chunk(sse(role_chunk(model, False)))
            await asyncio.sleep(config.stall)
            self.transport.close()
            return False
        n = 0 if fault == "empty_completion" else config.tokens
        role = role_chunk(model, config.tool_calls)
        if n == 0 or config.tool_calls:
            self._chunk(sse(role))
        if not fault and api != "responses":  # the plain stream: on the schedule, with every other
            stream = Stream(self, request, api, config.frames(model, api), arrival + config.ttft)
            self.schedule.add(stream)
            if not await stream.done:
                return False
            self._record(request, None, stream.sent, came)
            return True
        return await self._stream(request, api, model, role, fault, n, arrival, came)

    async def _stream(self, request: dict, api: str, model: str, role: dict, fault: str | None, n: int,
                      arrival: float, came: float) -> bool:
        """A stream of the Responses API or with a fault, as its own coroutine that sleeps before each
        token; False when the connection was closed on purpose."""
        stats, config = self.stats, self.config
        sent: list[float] = []
        for i in range(n):
            await asyncio.sleep(max(0.0, arrival + config.ttft + i * config.itl - self.loop.time()))
            if self.transport.is_closing():
                return False
            if i == 0 and api == "responses":  # the response and its message opened, as vLLM does
                for kind in ("response.created", "response.in_progress"):
                    self._chunk(response_event(kind, response={"id": "resp_x", "status": "in_progress"}))
                self._chunk(response_event("response.output_item.added", output_index=0,
                                           item={"type": "message", "id": "msg_x", "role": "assistant"}))
                self._chunk(response_event("response.content_part.added", output_index=0, content_index=0))
            elif i == 0 and not config.tool_calls:  # as vLLM sends it: the role with the first token
                self._chunk(sse(role))
            if i == n // 2 and fault == "stall_mid":
                await asyncio.sleep(config.stall)
                self.transport.close()
                return False
            if i == n // 2 and fault == "stream_cut":
                self.transport.close()
                return False
            if i == n // 2 and fault == "malformed_chunk":
                self._chunk(sse(b"{not json"))
            if i == n // 2 and fault == "stream_error":
                self._chunk(sse({"error": {"message": "injected engine error"}}))
            if i == n // 2 and fault == "non_utf8":
                self._chunk(b"data: {\"choices\": [{\"delta\": {\"content\": \"\xff\xfe\"}}]}\n\n")
            if i == n // 2 and fault == "delta_string":
                self._chunk(sse({"id": "x", "choices": [{"index": 0, "delta": "tok"}]}))
            if i == n // 2 and fault == "endless_line":  # no newline until the client hangs up (64 MiB at most)
                for _ in range(1024):
                    if self.transport.is_closing():
                        return False
                    self._chunk(b"x" * 65536)
                    await asyncio.sleep(0.001 if self.transport.get_write_buffer_size() > 2**20 else 0)
                self.transport.close()
                return False
            if api == "responses":
                self._chunk(response_event("response.output_text.delta", item_id="msg_x", output_index=0,
                                           content_index=0, delta=f"tok{i} ", logprobs=[]))
                sent.append(self.loop.time())
                continue
            chunk = config.token(model, api, i, n)
            if fault == "error_null":
                chunk["error"] = None
            self._chunk(sse(chunk))
            sent.append(self.loop.time())
            stats.lag.append(sent[-1] - (arrival + config.ttft + i * config.itl))
        self.transport.write(self.tail(request, api, n, fault))
        self._record(request, fault, sent, came)
        return True

    def tail(self, request: dict, api: str, n: int, fault: str | None) -> bytes:
        """What follows a stream's last token: its usage (or the Responses API's completed event), [DONE]
        and the body's end, as one write."""
        config = self.config
        prompt_tokens = len(json.dumps(request.get("messages") or request.get("prompt") or request.get("input"))) // 4
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        config.generated += n
        if config.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": min(config.cached_tokens, prompt_tokens)}
        if config.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": min(config.reasoning, n)}
        if fault == "tokens_string":
            usage["completion_tokens"] = str(n)
        chunks = []
        if api == "responses":
            chunks.append(response_event("response.completed", response={
                "id": "resp_x", "status": "completed", "usage": {
                    "input_tokens": prompt_tokens, "output_tokens": n, "total_tokens": prompt_tokens + n,
                    "input_tokens_details": {"cached_tokens": config.cached_tokens or 0}}}))
        else:
            if fault != "no_usage":
                final = {"id": "x", "object": "chat.completion.chunk", "model": request.get("model", "fake-model"),
                         "choices": [], "usage": usage}
                if config.fingerprints:
                    final["system_fingerprint"] = next(config.fingerprints)
                chunks.append(sse(final))
            if fault != "no_done":  # the body ends after the finish_reason and usage, as some proxies send it
                chunks.append(sse(b"[DONE]"))
        return b"".join(map(framed, chunks)) + b"0\r\n\r\n"

    def _record(self, request: dict, fault: str | None, sent: list[float], came: float) -> None:
        """A completed stream's true timing, as it was sent."""
        stats, config = self.stats, self.config
        if fault and EXPECTED[fault] is not None:
            return
        stats.outcomes["completed"] += 1
        stats.true_ttft.append(sent[0] - came)
        if "user" in request:
            stats.ttft_by_user[request["user"]] = sent[0] - came
        if len(sent) > config.reasoning:
            stats.true_ttfa.append(sent[config.reasoning] - came)
        if len(sent) > 1:
            stats.true_tpot.append((sent[-1] - sent[0]) / (len(sent) - 1))
        if sent:
            stats.streamed.append(sent[-1] - came)


def vllm_metrics(config: Config) -> str:
    """A vLLM 0.32-like /metrics (--vllm-metrics): the batch is --max-concurrency slots, every wait is for
    capacity, and a roomy KV cache, so that a capacity search names batch slots, as it would on vLLM."""
    labels = 'engine="0",model_name="fake-model"'
    blocks, used = 4096, config.running * 4
    return "".join(f"# TYPE {name} {kind}\n{name}{{{labels}{extra}}} {value}\n" for name, kind, extra, value in (
        ("vllm:num_requests_running", "gauge", "", config.running),
        ("vllm:num_requests_waiting", "gauge", "", config.waiting),
        ("vllm:kv_cache_usage_perc", "gauge", "", used / blocks),
        ("vllm:generation_tokens_total", "counter", "", config.generated),
        ("vllm:request_success_total", "counter", ',finished_reason="stop"', config.finished),
    )) + (f'# TYPE vllm:num_requests_waiting_by_reason gauge\n'
          f'vllm:num_requests_waiting_by_reason{{{labels},reason="capacity"}} {config.waiting}\n'
          f'vllm:num_requests_waiting_by_reason{{{labels},reason="deferred"}} 0\n'
          f'# TYPE vllm:cache_config_info gauge\n'
          f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",'
          f'num_gpu_blocks="{blocks}"}} 1.0\n')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (a test host's, in its namespace)")
    parser.add_argument("--ttft", type=float, default=0.1)
    parser.add_argument("--itl", type=float, default=0.02)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--stall", type=float, default=30.0, help="how long a `timeout` fault stalls")
    parser.add_argument("--retry-after", type=float, default=1.0, help="Retry-After of 429 and 503 answers")
    parser.add_argument("--fault", action="append", default=[], help="NAME=EVERY: every EVERY-th arrival fails so")
    parser.add_argument("--tool-calls", action="store_true", help="answer with a tool call's streamed arguments only")
    parser.add_argument("--reasoning", type=int, default=0, help="the first N tokens are reasoning_content")
    parser.add_argument("--cached-tokens", type=int, help="usage says this many prompt tokens were cached")
    parser.add_argument("--authorization", help="the Authorization header /v1/ requests must carry, else 401")
    parser.add_argument("--max-concurrency", type=int, help="streams served at once; the others wait")
    parser.add_argument("--no-responses", action="store_true", help="no /v1/responses: a 404, as an older server")
    parser.add_argument("--max-model-len", type=int,
                        help="serve /tokenize as vLLM does, a word a token, with this context length")
    parser.add_argument("--vllm-metrics", action="store_true",
                        help="GET /metrics as vLLM 0.32's (its slots as its batch)")
    parser.add_argument("--fingerprints", help="NAME,NAME,...: each answer names the next, as replicas behind a "
                                               "round-robin router do (--fingerprint-value)")
    parser.add_argument("--served", default="fake-model", help="NAME,NAME,...: the models /v1/models lists (the "
                                                               "base model and LoRA adapters)")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve https with this certificate and key")
    parser.add_argument("--uvloop", action="store_true", help="serve on uvloop's event loop (benchmarks/fidelity.py)")
    args = parser.parse_args()
    config, stats = Config(args), Stats()
    schedule = Schedule(config, stats, grain=0.0005 if args.uvloop else 0.0)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        tls = None
        if args.tls:
            tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            tls.load_cert_chain(*args.tls)
        server = await loop.create_server(lambda: Connection(config, stats, schedule), args.host, args.port,
                                          backlog=2048, ssl=tls)
        print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
        await server.serve_forever()

    if args.uvloop:
        import uvloop  # the benchmark's server at a thousand streams and more: asyncio's own loop falls behind

        # No cyclic garbage collector: the server's objects die by their counts, and a full collection
        # over a run's stats (a lag for each of a million chunks) stalled every stream for 20 ms.
        gc.disable()
        uvloop.run(serve())
    else:
        asyncio.run(serve())


if __name__ == "__main__":
    main()
