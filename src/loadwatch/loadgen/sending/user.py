"""The Locust user that streams completions; locustfiles subclass it and pick a workload."""

from __future__ import annotations

import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import NoReturn

import gevent
from gevent.pool import Group
from locust import User, constant, task
from locust.exception import StopUser
from locust.runners import WorkerRunner
from locust.user.task import LOCUST_STATE_STOPPING

from loadwatch.client.endpoints import PATHS, streams
from loadwatch.client.failures import RequestFailed, http_reason
from loadwatch.client.stream import HangUp, Streamer, StreamResult
from loadwatch.loadgen.process import BAD_WORKLOAD, process_of, run_users
from loadwatch.loadgen.recorder import LLMRequest
from loadwatch.loadgen.results import BAD_INPUT_EXIT_CODE
from loadwatch.loadgen.sending.models import UNKNOWN, resolve_model, unserved
from loadwatch.loadgen.sending.quota import WARMUP
from loadwatch.metrics.timing import request_metrics
from loadwatch.settings import LoadSettings
from loadwatch.workloads.arrivals import gap, spend
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.prompt import Conversation, Prompt
from loadwatch.workloads.sessions import Sessions
from loadwatch.workloads.trace import Trace

log = logging.getLogger(__name__)
RATE_CHECK_SECONDS = 0.5
MIN_BACKOFF, MAX_BACKOFF = 0.05, 1.0  # seconds a closed-loop user waits after an instant failure
MAX_RETRY_AFTER = 30.0  # the most of a server's Retry-After a user honours
# A trace's time 0 is this long after the run's start: its users are up and its first prompts made by then.
REPLAY_LEAD = 1.0
STOP_GRACE = 30.0  # seconds a user that asked its runner to quit waits for the quit to kill it


def pooling_payload(settings: LoadSettings, model: str | None, prompts: list[Prompt]) -> dict:
    """An embeddings request's texts, or a rerank request's query (the first) and documents: the
    prompts' text, without the generation fields a dataset line may carry."""
    texts = [prompt.text for prompt in prompts]
    payload: dict = {"input": texts} if settings.endpoint == "embeddings" else {"query": texts[0],
                                                                               "documents": texts[1:]}
    if model:
        payload["model"] = model
    payload.update(settings.extra_body)
    return payload


def prompts_per_request(settings: LoadSettings) -> int:
    """Prompts one request takes from the workload: one, or an embeddings request's texts, or a
    rerank request's query and documents."""
    if streams(settings.endpoint):
        return 1
    return settings.inputs_per_request + (settings.endpoint == "rerank")


def build_payload(settings: LoadSettings, model: str | None, prompt: Prompt) -> dict:
    max_tokens = prompt.max_tokens or settings.max_tokens
    if settings.endpoint == "responses":
        # The conversation as input items, the output limit by its own name; the usage always comes
        # with the last event.
        payload: dict = {"input": list(prompt.messages), "max_output_tokens": max_tokens, "stream": True}
    else:
        payload = {"max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}}
        if settings.endpoint == "chat":
            payload["messages"] = list(prompt.messages)
        else:
            payload["prompt"] = prompt.text
    if model:
        payload["model"] = model
    if settings.temperature is not None:
        payload["temperature"] = settings.temperature
    if settings.ignore_eos:
        payload["ignore_eos"] = True
    payload.update(settings.extra_body)
    payload.update(prompt.body or {})  # a dataset line's own fields win over the run's
    return payload


class InFlight:
    """An open loop's requests in flight, each on a keep-alive connection of its own, kept for the
    next send once its request is over."""

    def __init__(self, user: LLMUser) -> None:
        self.user = user
        self.idle: list[Streamer] = []
        self.busy = Group()

    def __len__(self) -> int:
        return len(self.busy)

    def send(self, kind: str, prompt: Prompt | None = None) -> None:
        self.busy.spawn(self._send, kind, self.idle.pop() if self.idle else self.user.new_streamer(), prompt)

    def _send(self, kind: str, streamer: Streamer, prompt: Prompt | None) -> None:
        try:
            self.user.send(kind, streamer, prompt)
        finally:
            self.idle.append(streamer)

    def finish(self) -> NoReturn:
        """Send no more: let those in flight finish, and the user stop."""
        self.busy.join()
        raise StopUser()

    def close(self) -> None:
        self.busy.kill()
        for streamer in self.idle:
            streamer.close()


class LLMUser(User):
    """A client that streams completions: a closed loop (send, wait for the end, send the next), an
    open-loop arrival process (--request-rate), or a trace replayed at its own times, chosen once
    when the user starts, as is where its prompts come from (the workload, or its conversations)."""

    abstract = True
    scenario = "chat"  # the Locust request name and the `scenario` label
    workload: Callable[[], Prompt] | None = None  # a locustfile's own; None: the run's --dataset
    dataset: str | None = None  # a locustfile's dataset, unless --dataset names another than builtin
    wait_time = constant(0)
    backoff = 0.0  # the closed loop's current pause after instant failures
    conversation: Conversation | None = None  # --dataset sessions: the one this user is in
    next_prompt: Callable[[], Prompt]
    loop: Callable[[], None]  # how this user sends: closed, open or a replay

    def on_start(self) -> None:
        self.process = process_of(self.environment)
        settings = self.process.settings
        self.streamer = self.new_streamer()
        split = settings.models()
        # A split's first model stands for all of them where one is needed (its tokenizer, open-loop labels).
        self.model = split[0][0] if split else settings.model or resolve_model(self.streamer)
        self.pick_model = self._splitter(split) if split else self._model
        # The models named (a split's adapters too) checked before anything is sent.
        named = [name for name, _ in split] if split else [settings.model] if settings.model else []
        why = unserved(self.streamer, named)
        if why is None:
            try:
                workload = self.workload or self.process.dataset_workload(self.streamer, self.model, self.dataset,
                                                                            self.worker, self.workers)
            except (DatasetError, RequestFailed) as exc:
                why = f"cannot build the {self.process.dataset_name(self.dataset)} dataset: {exc}"
        if why is not None:
            log.error("loadwatch: %s", why)
            self.environment.process_exit_code = BAD_INPUT_EXIT_CODE  # a workload this server cannot take
            runner = self.environment.runner
            if isinstance(runner, WorkerRunner):  # the master ends the run and says why, with the same code
                runner.send_message(BAD_WORKLOAD, {"why": why})
            # Nothing was sent (no user of this process has a workload): no request to let finish, so
            # the quit kills the users at once instead of waiting --stop-timeout for each. Not from this
            # user's own greenlet: quitting kills it, and the quit with it; it waits here to be killed
            # (a user that stopped itself trips Locust's own stop).
            self.environment.stop_timeout = 0
            gevent.spawn(runner.quit)
            gevent.sleep(STOP_GRACE)
            raise StopUser() from None
        # Sessions and traces are closed loops of their own kind (their datasets refuse --request-rate).
        if isinstance(workload, Trace):
            self.loop = partial(self._replay, workload)  # each entry brings its prompt
        else:
            self.next_prompt = partial(self._next_turn, workload) if isinstance(workload, Sessions) else workload
            self.loop = self._open_loop if settings.request_rate else self._closed_loop

    @property
    def worker(self) -> int:
        """This process's index among the run's Locust processes (0 for a local runner)."""
        return getattr(self.environment.runner, "worker_index", 0)

    @property
    def workers(self) -> int:
        """How many Locust processes share the run, as far as this one knows: the master's
        --expect-workers (which --processes sets, and a worker receives with its users), or more
        where more have joined."""
        expected = getattr(self.environment.parsed_options, "expect_workers", None) or 1
        return max(expected, self.worker + 1)

    def _model(self) -> str | None:
        """The model to ask for: the one given, or the server's, looked up again while it is unknown."""
        if self.model is None and not self.process.settings.model:
            self.model = resolve_model(self.streamer)
        return self.model

    def _splitter(self, split: list[tuple[str, float]]) -> Callable[[], str]:
        rng = random.Random(f"{self.process.settings.seed}-split-{self.worker}-{next(self.process.user_numbers)}")
        names, weights = [name for name, _ in split], [weight for _, weight in split]
        return lambda: rng.choices(names, weights)[0]

    def new_streamer(self) -> Streamer:
        settings = self.process.settings
        return Streamer(self.host or "", self.process.authorization, settings.request_timeout,
                        settings.max_line_bytes, settings.headers())

    def on_stop(self) -> None:
        self.streamer.close()

    @task
    def generate(self) -> None:
        self.loop()

    def _closed_loop(self) -> None:
        """One request, then the pause its answer calls for (and, in a conversation, the think time)."""
        kind = self.process.run_quota.take()
        if kind is None:  # this run's --num-requests are all sent
            raise StopUser()
        self._pause_after(self.send(kind, self.streamer))
        if self.conversation is not None and self.process.settings.think_time:
            gevent.sleep(self.process.settings.think_time)

    def _next_turn(self, sessions: Sessions) -> Prompt:
        while True:
            if self.conversation is None:
                self.conversation = sessions.start()
            prompt = self.conversation.next()
            if prompt is not None:
                return prompt
            self.conversation = None  # over: the next one starts

    def _pause_after(self, result: StreamResult) -> None:
        """A closed loop must not spin on a server that refuses at once (400, 429, 503, refused):
        wait as long as its Retry-After says (bounded), or back off briefly, doubling while it lasts."""
        failure = result.failure
        if failure is None or result.elapsed >= MAX_BACKOFF:
            self.backoff = 0.0
            return
        if failure.retry_after is not None:
            gevent.sleep(min(failure.retry_after, MAX_RETRY_AFTER))
            return
        self.backoff = min(MAX_BACKOFF, max(MIN_BACKOFF, 2 * self.backoff))
        gevent.sleep(self.backoff)

    def _open_loop(self) -> None:
        """Send at scheduled times whatever the answers: no coordinated omission."""
        settings, state = self.process.settings, self.process.state
        users = run_users(self.environment.parsed_options)
        cap = math.ceil(settings.max_concurrency / users) if settings.max_concurrency else None
        # Reproducible for a seed: the same worker and user draw the same arrival times every run.
        rng = random.Random(f"{settings.seed}-{self.worker}-{next(self.process.user_numbers)}")
        labels = (self.model or UNKNOWN, self.scenario)
        in_flight = InFlight(self)
        scheduled = time.monotonic()
        try:
            while True:
                need = gap(rng, settings.burstiness)
                while need > 0:
                    # A load shape may change the rate: look at it again every so often.
                    rate = self.process.request_rate() / users
                    wait, need = spend(need, rate, RATE_CHECK_SECONDS)
                    scheduled += wait
                    gevent.sleep(max(0.0, scheduled - time.monotonic()))
                    if self._state == LOCUST_STATE_STOPPING:
                        # Locust's graceful stop (-t, --stop-timeout): send no more, let those in
                        # flight finish, rather than wait out the stop timeout between arrivals.
                        in_flight.finish()
                # Checked before a ticket is taken: a dropped arrival must not use up --num-requests.
                now = time.time()
                due = now - (time.monotonic() - scheduled)  # the schedule runs on the monotonic clock
                if cap is not None and len(in_flight) >= cap:
                    self.process.recorder.record_drop(labels, state.stage_of(now), due)
                    continue
                kind = self.process.run_quota.take()
                if kind is None:
                    in_flight.finish()
                now = time.time()  # take() may wait for the master's tickets: that wait is lag too
                self.process.recorder.record_arrival(labels, state.stage_of(now), due, now, warmup=kind == WARMUP)
                in_flight.send(kind)
        finally:
            in_flight.close()

    def _replay(self, trace: Trace) -> None:
        """Each entry at its own time (divided by --speedup) from the replay's start, whatever the
        answers; the numbered tickets make every entry go out once across all workers."""
        settings, state = self.process.settings, self.process.state
        labels = (self.model or UNKNOWN, self.scenario)
        in_flight = InFlight(self)
        try:
            while (ticket := self.process.run_quota.take_numbered()) is not None:
                kind, index = ticket
                if index is None:
                    break
                if index in trace.skipped:  # named before the replay: too long for the server's context
                    self.process.recorder.skipped += 1
                    self.process.done_check()
                    continue
                prompt = trace.prompt(index)  # made before its time: the first use of a block asks the server
                while (start := state.load_started()) is None:  # a worker: the master's clock comes with tickets
                    gevent.sleep(0.05)
                due = start + REPLAY_LEAD + trace.due(index, settings.speedup)
                while (wait := due - time.time()) > 0:
                    gevent.sleep(min(wait, RATE_CHECK_SECONDS))
                    if self._state == LOCUST_STATE_STOPPING:
                        in_flight.finish()
                now = time.time()
                self.process.recorder.record_arrival(labels, state.stage_of(now), due, now, warmup=False)
                in_flight.send(kind, prompt)
            in_flight.finish()
        finally:
            in_flight.close()

    def send(self, kind: str, streamer: Streamer, prompt: Prompt | None = None) -> StreamResult:
        settings = self.process.settings
        prompt = prompt or self.next_prompt()
        model = self.pick_model()
        if streams(settings.endpoint):
            payload = build_payload(settings, model, prompt)
        else:
            more = [self.next_prompt() for _ in range(prompts_per_request(settings) - 1)]
            payload = pooling_payload(settings, model, [prompt, *more])
        labels = (model or UNKNOWN, self.scenario)
        # In flight until recorded: a worker's last report waits for none to be in flight, and counting
        # its tokens may ask the server.
        in_flight = self.process.recorder.in_flight
        in_flight[labels] += 1
        try:
            return self._send_and_record(kind, streamer, prompt, model, payload, labels)
        finally:
            in_flight[labels] -= 1

    def _send_and_record(self, kind: str, streamer: Streamer, prompt: Prompt, model: str | None, payload: dict,
                         labels: tuple[str, str]) -> StreamResult:
        settings = self.process.settings
        warmup, endpoint = kind == WARMUP, settings.endpoint
        request_id = os.urandom(16).hex()  # as random as uuid4's hex, without a UUID object made each request
        hang_up = HangUp(settings.cancel_after, settings.cancel_after_tokens) \
            if settings.cancel_ratio and random.random() < settings.cancel_ratio else None
        result = streamer.stream(endpoint, payload, request_id, hang_up)
        failure = result.failure
        if failure is not None and failure.reason == http_reason(404):
            self.process.not_found(self.environment, streamer.origin + streamer.prefix + PATHS[endpoint], str(failure))
        timing, tokens_from = result.timing, "usage"
        if timing is not None and result.text_without_usage is not None:
            n, tokens_from = self.process.count_output_tokens(streamer, model, result.text_without_usage)
            timing = replace(timing, completion_tokens=n)
        metrics = request_metrics(timing) if timing else None
        if metrics is not None and metrics.engine is None:
            self.process.without_engine_account(streamer.origin)
        record = LLMRequest(
            model=labels[0],
            scenario=self.scenario,
            started_at=result.started_at,
            elapsed=result.elapsed,
            metrics=metrics,
            failure_reason=failure.reason if failure else None,
            warmup=warmup,
            tokens_from=tokens_from,
            request_id=request_id,
            stage=self.process.state.stage_of(result.started_at),
            turn=prompt.turn,
            prefix=prompt.prefix,
            cancelled=result.cancelled,
            cancelled_ttft=result.first_chunk,
            rejection=failure.rejection if failure else None,
            images=prompt.images,
            image_bytes=prompt.image_bytes,
            without_done=result.without_done,
            # a failure's error answer has no fingerprint: only a router's header names its replica
            replica=self.process.replica_of(metrics.served_by if metrics else None, result.routed_to)
            if metrics or failure is not None else None,
            fleet=bool(settings.replica),
        )
        if self.conversation is not None:
            self.conversation.answered(result.answer.message() if metrics and result.answer else None)
        self.environment.events.request.fire(
            request_type="POST",
            # Locust's own table keeps warm-up and hang-ups apart too.
            name=f"{self.scenario} (warm-up)" if warmup else f"{self.scenario} (cancelled)" if result.cancelled
            else f"{self.scenario} (rejected)" if record.rejection else self.scenario,
            response_time=(metrics.e2e if metrics else result.elapsed) * 1000.0,
            response_length=result.received_bytes,
            response=None,
            context={"llm": record},
            exception=failure,
            start_time=result.started_at,
            url=streamer.prefix + PATHS[endpoint],
        )
        return result
