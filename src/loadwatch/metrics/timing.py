"""Per-request latency maths, from raw timestamps to the figures `vllm bench serve` defines
(docs/concepts/measurement.md).

Capture (client/stream.py) records when things arrived; this module only does arithmetic, so
it is tested alone and matches `vllm bench serve` definition for definition.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import sub


@dataclass(frozen=True)
class EngineAccount:
    """vLLM's own account of one request, from the `metrics` of its final usage chunk (vLLM 0.32
    with --enable-per-request-metrics): intervals of the engine's monotonic clock, in seconds, so
    comparable with the client's intervals though never with its wall-clock times."""

    queue: float | None  # queued until first scheduled
    prefill: float | None  # first scheduled until the first token
    decode: float | None  # first token until the last
    mean_itl: float | None
    spec_acceptance_length: float | None = None  # speculative decoding: tokens per verify step, bonus included
    spec_acceptance_rate: float | None = None  # accepted draft tokens over drafted


# Not frozen, as RequestMetrics and the request's other records: made once a request and never changed
# after, where a frozen dataclass sets each field through object.__setattr__ (a few us a request).
@dataclass(slots=True)
class RawTiming:
    """What the stream reader saw: the send time and the arrival of each chunk with text."""

    t0: float
    content_arrivals: tuple[float, ...]
    prompt_tokens: int | None
    completion_tokens: int | None
    headers_at: float | None = None  # when the response headers had arrived
    answer_at: float | None = None  # the first chunk of answer (text or tool-call arguments) after any reasoning
    cached_tokens: int | None = None  # prompt tokens the server found in its prefix cache
    reasoning_tokens: int | None = None
    tool_calls: int = 0
    engine: EngineAccount | None = None
    answered_at: float | None = None  # embeddings, rerank: when the last byte of their one answer came
    served_by: str | None = None  # the system_fingerprint of the answer: a fleet's replica names itself there


@dataclass(slots=True)
class RequestMetrics:
    ttft: float | None  # None for an answer that has no first token (embeddings, rerank)
    e2e: float
    itl: tuple[float, ...]
    tpot: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    # Time to the response headers: vLLM sends them once it has parsed, templated and tokenized the
    # request, before any generation; the rest of the TTFT is queueing, prefill and streaming.
    headers: float | None = None
    ttfa: float | None = None  # time to the first answer token: TTFT for a model that does not reason first
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    tool_calls: int = 0
    engine: EngineAccount | None = None
    served_by: str | None = None

    @property
    def ttft_rest(self) -> float | None:
        """The client's TTFT less the headers, the engine's queue and its prefill: the hop from the
        API server to the engine core and back, detokenising, streaming and the network (docs/concepts/measurement.md:
        Why this request was slow). Below zero by more than clock noise, the engine's account is not
        this request's."""
        engine = self.engine
        if engine is None or engine.queue is None or engine.prefill is None or self.headers is None \
                or self.ttft is None:
            return None
        return self.ttft - self.headers - engine.queue - engine.prefill

    @property
    def cached_ratio(self) -> float | None:
        """Share of the prompt the server had cached, where it said both."""
        if self.cached_tokens is None or not self.prompt_tokens:
            return None
        return min(1.0, self.cached_tokens / self.prompt_tokens)


def request_metrics(raw: RawTiming) -> RequestMetrics:
    """TTFT, ITL, E2E and TPOT of one successful request; of an embeddings or rerank request, its
    E2E alone (to the last byte of its answer, as `vllm bench serve` times them).

    Raises ValueError when no chunk carried text: such a request is a failure, not a latency.
    """
    if raw.answered_at is not None:
        return RequestMetrics(None, raw.answered_at - raw.t0, (), None, raw.prompt_tokens, None,
                              headers=None if raw.headers_at is None else raw.headers_at - raw.t0)
    arrivals = raw.content_arrivals
    if not arrivals:
        raise ValueError("no chunk carried generated text")
    ttft = arrivals[0] - raw.t0
    e2e = arrivals[-1] - raw.t0
    itl = tuple(map(sub, arrivals[1:], arrivals[:-1]))  # each gap, later less earlier
    n = raw.completion_tokens
    tpot = (e2e - ttft) / (n - 1) if n is not None and n > 1 else None
    return RequestMetrics(
        ttft=ttft,
        e2e=e2e,
        itl=itl,
        tpot=tpot,
        prompt_tokens=raw.prompt_tokens,
        completion_tokens=n,
        headers=None if raw.headers_at is None else min(raw.headers_at - raw.t0, ttft),
        ttfa=None if raw.answer_at is None else raw.answer_at - raw.t0,
        cached_tokens=raw.cached_tokens,
        reasoning_tokens=raw.reasoning_tokens,
        tool_calls=raw.tool_calls,
        engine=raw.engine,
        served_by=raw.served_by,
    )
