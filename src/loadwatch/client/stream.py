"""Send one streamed completion request and record when each chunk with text arrived.

geventhttpclient (Locust's own fast HTTP stack) keeps the connection (connects, checks a kept one is
still open, speaks TLS). A stream's request is written whole in one send, and gevent's hub reads its
answer from the first byte (client/reader.py), headers and stream, in the same pass as every other
stream in flight, stamping each read before any parsing: the request's greenlet is woken once for it
(over TLS, the greenlet reads, a wake for each read).
Its head is built once per connection's user, not per request as geventhttpclient's request() builds
and checks it: with the wake for the headers, that was a third of a request's own CPU at a thousand
streams a core (py-spy). Embeddings, rerank and the small JSON requests go through request() itself.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import socket
from dataclasses import dataclass
from importlib.metadata import version
from time import perf_counter, time

import gevent
import orjson
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPParseError, HTTPSocketPoolResponse
from geventhttpclient.url import URL

from loadwatch.client import pooled
from loadwatch.client.answer import Answer
from loadwatch.client.endpoints import PATHS, Endpoint, streams
from loadwatch.client.failures import Reason, RequestFailed, http_reason
from loadwatch.client.heard import ERROR_BODY_LIMIT, ROUTED_TO, first, refusal, server_error_message
from loadwatch.client.kept import keeping
from loadwatch.client.pooled import inputs_of
from loadwatch.client.reader import follow
from loadwatch.client.reading import HungUp, Reading
from loadwatch.credentials import split_credentials
from loadwatch.metrics.timing import RawTiming

_NETWORK_ERRORS = (OSError, socket.timeout, HTTPParseError)
USER_AGENT = f"loadwatch/{version('loadwatch')}"
# The headers every request carries beside its body's: a hash router's key where nothing else is.
SENT_HEADERS = ("X-Request-Id",)
log = logging.getLogger(__name__)
_logged: set[str] = set()  # exception types already logged as client_error, once each per process


@dataclass(slots=True)  # not frozen: see RawTiming
class StreamResult:
    """One finished request: `timing` when it succeeded, `failure` when it did not."""

    started_at: float  # wall clock, for run windows shared across processes
    elapsed: float
    received_bytes: int
    timing: RawTiming | None = None
    failure: RequestFailed | None = None
    # The generated text, kept only when the server sent no usage: its tokens are counted afterwards.
    text_without_usage: str | None = None
    answer: Answer | None = None  # what the stream said, for a session's history
    cancelled: bool = False  # the client hung up on purpose (HangUp)
    first_chunk: float | None = None  # a cancelled request's TTFT, where it got that far
    without_done: bool = False  # complete, though its body ended without `data: [DONE]`
    # The replica a router named in the answer's headers (ROUTED_TO), wherever they came: of a failed
    # request too (an error status, a stream cut after its headers). None where they named none.
    routed_to: str | None = None


@dataclass
class _Heard:
    """What one request's answer said in its headers, once they came: kept for a request that fails after."""

    routed_to: str | None = None


@dataclass(frozen=True)
class HangUp:
    """A client that closes the stream before its end: `after` seconds from the send, or once
    `after_chunks` chunks of output came (--cancel-after, --cancel-after-tokens)."""

    after: float | None = None
    after_chunks: int | None = None


def split_base_url(base_url: str) -> tuple[str, str]:
    """(origin, path prefix): `http://h:8000/v1` and `http://h:8000` address the same API."""
    url = URL(split_credentials(base_url)[0])  # credentials go in a header, never in errors and logs
    prefix = url.path.rstrip("/")
    if prefix.endswith("/v1"):
        prefix = prefix[: -len("/v1")]
    return f"{url.scheme}://{url.netloc}", prefix


class _Pending(HTTPSocketPoolResponse):
    """The answer to a request just sent, nothing of it read: its reader reads its headers with its
    stream. Otherwise geventhttpclient's own response, which hands the connection back to its pool
    when the answer is complete and the server keeps it open."""

    def _read_headers(self, pre_buffered: bytes = b"") -> None:
        return None

    def _on_message_complete(self) -> None:
        if self.get_code() < 200:  # an interim answer: the final one follows on this connection, still ours
            self.message_complete = True
            return
        super()._on_message_complete()


# RFC 9110's field name and value (visible characters, spaces and tabs, obs-text), as geventhttpclient
# checks each field of the requests it writes.
_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_OURS = ("content-length", SENT_HEADERS[0].lower())  # written with each request, not by --header


def request_head(host: str, port: int | None, fields: dict[str, str]) -> bytes:
    """A request's header lines but its length and id, as geventhttpclient writes them: Host with the
    port where it is not the scheme's, an IPv6 address in brackets; of fields with one name in any
    case, the last (--header's come before loadwatch's own). ValueError for a field that cannot be
    sent as it is."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    if port not in (None, 80, 443):
        host = f"{host}:{port}"
    merged: dict[str, tuple[str, str]] = {}
    for name, value in {"Host": host, "User-Agent": USER_AGENT, **fields}.items():
        if not _NAME.fullmatch(name) or not _VALUE.fullmatch(value):
            raise ValueError(f"cannot send the header {name!r}: {value!r}")
        merged.pop(name.lower(), None)  # the last given of a name, in its place
        merged[name.lower()] = (name, value)
    return "".join(f"{name}: {value}\r\n" for key, (name, value) in merged.items()
                   if key not in _OURS).encode("latin-1")


class Streamer:
    """One keep-alive connection to an OpenAI-compatible server, as one Locust user holds it."""

    def __init__(self, base_url: str, authorization: str | None, timeout: float,
                 max_line_bytes: int, extra_headers: dict[str, str] | None = None) -> None:
        self.origin, self.prefix = split_base_url(base_url)
        self.timeout = timeout
        self.max_line_bytes = max_line_bytes
        headers = {**(extra_headers or {}), "Content-Type": "application/json"}
        if authorization:
            headers["Authorization"] = authorization
        # What each answer is: a stream of events, or one JSON (embeddings, rerank, /v1/models, /tokenize).
        self.stream_headers = {**headers, "Accept": "text/event-stream"}
        self.json_headers = {**headers, "Accept": "application/json"}
        self._client: HTTPClient | None = None
        self._head: bytes | None = None  # a stream's request head but its length and id (request_head)

    def _http(self) -> HTTPClient:
        if self._client is None:
            # geventhttpclient trusts certifi's authorities alone: a server whose certificate an
            # authority of your own signed is trusted as Python's ssl and curl trust it, through the
            # file SSL_CERT_FILE names (one naming no file is passed over, as Python's ssl does).
            authorities = os.environ.get("SSL_CERT_FILE")
            use = authorities is not None and os.path.isfile(authorities) and self.origin.startswith("https:")
            self._client = keeping(HTTPClient.from_url(
                self.origin,
                headers={"User-Agent": USER_AGENT},  # as a stream's request head says it (request_head)
                ssl_options={"ca_certs": authorities} if use else None,
                concurrency=1,
                connection_timeout=min(self.timeout, 30.0),
                # No timeout of the socket's own: each request has one gevent.Timeout over all of it,
                # and a socket timeout costs a Timeout armed and cancelled on every read of every chunk.
                network_timeout=None,
            ))
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def get_json(self, path: str) -> object:
        """A small non-streamed GET, for /v1/models."""
        return self._request_json("GET", path, None)

    def post_json(self, path: str, payload: dict) -> dict:
        """A small non-streamed POST, for /tokenize and /detokenize."""
        return self._request_json("POST", path, json.dumps(payload).encode())

    def _request_json(self, method: str, path: str, body: bytes | None) -> dict:
        with gevent.Timeout(min(self.timeout, 30.0), RequestFailed(Reason.TIMEOUT, path)):
            try:
                response = self._http().request(method, self.prefix + path, body=body or b"",
                                                headers=self.json_headers)
                reply = response.read(ERROR_BODY_LIMIT if response.status_code != 200 else None)
            except _NETWORK_ERRORS as exc:
                self.close()
                raise RequestFailed(Reason.CONNECTION, f"{self.origin}: {exc}") from exc
        if response.status_code != 200:
            raise RequestFailed(http_reason(response.status_code), server_error_message(reply))
        try:
            return json.loads(reply)
        except ValueError as exc:
            raise RequestFailed(Reason.MALFORMED_CHUNK, f"{path} did not return JSON") from exc

    def stream(self, endpoint: Endpoint, payload: dict, request_id: str | None = None,
               hang_up: HangUp | None = None) -> StreamResult:
        """One streamed request; `request_id` goes in X-Request-Id, which vLLM takes as its own. With
        `hang_up`, the connection is closed early, as a client that cancels: vLLM aborts the request."""
        body = orjson.dumps(payload)  # a few times faster than json's, for the same JSON
        received = 0
        started_at = time()
        t0 = perf_counter()
        timer = gevent.Timeout(self.timeout)
        timer.start()
        hang = gevent.Timeout(hang_up.after) if hang_up is not None and hang_up.after is not None else None
        if hang is not None:
            hang.start()
        arrivals: list[float] = []
        heard = _Heard()
        try:
            if streams(endpoint):
                wants_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
                timing, received, answer, without_done = self._read_stream(
                    endpoint, body, request_id, t0, arrivals, hang_up.after_chunks if hang_up else None, wants_usage,
                    heard)
            else:  # through geventhttpclient's request(), which takes the headers as a dict
                headers = {**self.json_headers, SENT_HEADERS[0]: request_id} if request_id else self.json_headers
                timing, received = self._read_answer(endpoint, body, headers, t0, inputs_of(endpoint, payload),
                                                     heard)
                answer, without_done = None, False
        except RequestFailed as failure:
            self.close()
            return StreamResult(started_at, perf_counter() - t0, received, failure=failure,
                                routed_to=heard.routed_to)
        except HungUp:
            return self._hung_up(started_at, t0, received, arrivals)
        except gevent.Timeout as fired:
            if fired is hang:
                return self._hung_up(started_at, t0, received, arrivals)
            if fired is not timer:
                raise
            self.close()
            timed_out = RequestFailed(Reason.TIMEOUT, f"no complete response within {self.timeout:g} s")
            return StreamResult(started_at, perf_counter() - t0, received, failure=timed_out,
                                routed_to=heard.routed_to)
        except Exception as exc:  # whatever else: the request still ends, counted once
            self.close()
            kind = type(exc).__name__
            if kind not in _logged:
                _logged.add(kind)
                log.exception("a request failed inside the load generator (%s); such requests count as "
                              "client_error, and this is logged once", kind)
            failed = RequestFailed(Reason.CLIENT_ERROR, f"{kind}: {exc}")
            return StreamResult(started_at, perf_counter() - t0, received, failure=failed,
                                routed_to=heard.routed_to)
        finally:
            timer.close()
            if hang is not None:
                hang.close()
        return StreamResult(started_at, perf_counter() - t0, received, timing=timing, answer=answer,
                            text_without_usage=answer.text() if answer and timing.completion_tokens is None else None,
                            without_done=without_done, routed_to=heard.routed_to)

    def _hung_up(self, started_at: float, t0: float, received: int, arrivals: list[float]) -> StreamResult:
        self.close()  # the server sees the connection go, and aborts the request
        return StreamResult(started_at, perf_counter() - t0, received, cancelled=True,
                            first_chunk=arrivals[0] - t0 if arrivals else None)

    def _post(self, endpoint: Endpoint, body: bytes, headers: dict[str, str], heard: _Heard):
        """The response, once its headers are in (what they said in `heard`, a non-200's too);
        RequestFailed for anything but a 200."""
        try:
            response = self._http().post(self.prefix + PATHS[endpoint], body, headers=headers)
        except _NETWORK_ERRORS as exc:
            raise RequestFailed(Reason.CONNECTION, f"{self.origin}: {exc}") from exc
        heard.routed_to = first(response.get(ROUTED_TO))
        if response.status_code != 200:
            try:
                error_body = response.read(ERROR_BODY_LIMIT)
            except _NETWORK_ERRORS:
                error_body = b""
            # The rest of a long error body stays unread: the connection is closed with the failure.
            raise refusal(response, error_body)
        return response

    def _read_answer(self, endpoint: Endpoint, body: bytes, headers: dict[str, str], t0: float,
                     inputs: int, heard: _Heard) -> tuple[RawTiming, int]:
        """An embeddings or rerank request: timed to the last byte of its one answer."""
        response = self._post(endpoint, body, headers, heard)
        headers_at = perf_counter()
        try:
            reply = response.read()
        except _NETWORK_ERRORS as exc:
            raise RequestFailed(Reason.STREAM_CUT, f"the answer was cut: {exc}") from exc
        answered_at = perf_counter()
        tokens = pooled.prompt_tokens(endpoint, reply, inputs)
        return RawTiming(t0, (), tokens, None, headers_at, answered_at=answered_at), len(reply)

    def _send(self, endpoint: Endpoint, body: bytes, request_id: str | None) -> _Pending:
        """A stream's request written to the kept connection (or a new one); its answer unread."""
        client = self._http()
        if self._head is None:
            self._head = request_head(client.host, client.port, self.stream_headers)
        request = b"POST %s HTTP/1.1\r\n%s%sContent-Length: %d\r\n\r\n%s" % (
            (self.prefix + PATHS[endpoint]).encode("latin-1"), self._head,
            b"%s: %s\r\n" % (SENT_HEADERS[0].encode(), request_id.encode("latin-1")) if request_id else b"", len(body),
            body)
        pool = client._connection_pool
        try:
            sock = pool.get_socket()
        except _NETWORK_ERRORS as exc:
            raise RequestFailed(Reason.CONNECTION, f"{self.origin}: {exc}") from exc
        try:
            sock.sendall(request)
        except OSError as exc:
            # Reset or closed while it was sent: the server may have answered (a refusal) before it
            # closed, and the answer is read as any other; on any other error there is none.
            if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
                pool.release_socket(sock)
                raise RequestFailed(Reason.CONNECTION, f"{self.origin}: {exc}") from exc
        except BaseException:  # a timeout, a hang-up, a kill while a long prompt was sent: the server sees us go
            pool.release_socket(sock)
            raise
        return _Pending(sock, pool, method="POST")

    def _read_stream(self, endpoint: Endpoint, body: bytes, request_id: str | None, t0: float,
                     arrivals: list[float], hang_up_after: int | None,
                     wants_usage: bool, heard: _Heard) -> tuple[RawTiming, int, Answer, bool]:
        """The answer read to its end, headers and stream, by the process's reader (client/reader.py)."""
        reading = Reading(endpoint, self._send(endpoint, body, request_id), self.max_line_bytes, arrivals,
                          hang_up_after, self.origin)
        try:
            follow(reading)
        finally:
            heard.routed_to = reading.routed_to
        timing, without_done = reading.timing(t0, wants_usage)
        return timing, reading.received, reading.answer, without_done
