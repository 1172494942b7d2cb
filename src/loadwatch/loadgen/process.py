"""loadwatch's part of one Locust process: its settings, run state, quota and workloads, in one
`Process` that `attach` puts on Locust's environment, where users, the shape and the role's handlers
reach it with `process_of`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import count

import gevent
from gevent.lock import Semaphore
from pydantic import ValidationError

from loadwatch.client.failures import RequestFailed
from loadwatch.client.stream import Streamer
from loadwatch.credentials import authorization, read_secret, split_credentials
from loadwatch.loadgen.recorder import Recorder
from loadwatch.loadgen.replica_watch import ReplicaWatch
from loadwatch.loadgen.sending.quota import Quota, Tickets, WorkerTickets
from loadwatch.loadgen.sending.schedule import level_now, plan_run
from loadwatch.loadgen.state import RunState
from loadwatch.settings import LoadSettings, ReplicaNames
from loadwatch.workloads.context import check_context, fit_trace
from loadwatch.workloads.datasets import DATASETS, build, validate
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.images import ImagePrompts
from loadwatch.workloads.prompt import Cycle, Workload
from loadwatch.workloads.sessions import Sessions
from loadwatch.workloads.tokens import ApproximateTokenizer, ServerTokenizer, tokenizer_for
from loadwatch.workloads.trace import Trace

log = logging.getLogger(__name__)


def run_users(options) -> int:
    """The run's -u: every user's share of an open loop's rate, and a closed loop shape's peak."""
    return max(1, int(getattr(options, "num_users", None) or 1))


def settings_from(options) -> LoadSettings:
    """Validated settings with a readable dataset and a plannable shape, or ValueError naming what is wrong."""
    try:
        settings = LoadSettings.from_options(options)
    except ValidationError as exc:
        problems = "; ".join(f"--{str(e['loc'][0]).replace('_', '-')}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"loadwatch: invalid options: {problems}") from None
    try:
        settings = validate(settings)
    except DatasetError as exc:
        raise ValueError(f"loadwatch: {exc}") from None
    try:
        plan_run(settings, run_users(options))
    except ValueError as exc:
        raise ValueError(f"loadwatch: {exc}") from None
    return settings


def take_credentials(environment, settings: LoadSettings) -> str | None:
    """This process's Authorization header, from its own environment and command line: the API key,
    else the user:password of its -H URL. The URL loses them, so that Locust shows, logs and sends
    the host to workers without them. CredentialError (a ValueError) when a key file is unreadable."""
    api_key = read_secret("OPENAI_API_KEY", settings.api_key_file)
    options = environment.parsed_options
    # A worker's own -H: its environment.host may already be the master's (a spawn can come first).
    own_host = getattr(options, "host", None) or environment.host or ""
    _url, basic = split_credentials(own_host)
    if environment.host:
        environment.host = split_credentials(environment.host)[0]
    if getattr(options, "host", None):
        options.host = split_credentials(options.host)[0]
    return authorization(api_key, basic)


BAD_WORKLOAD = "loadwatch_bad_workload"  # worker -> master: it cannot build the run's workload, and why


@dataclass
class Process:
    settings: LoadSettings
    state: RunState  # the run's own on the master or a local runner, a replica on a worker
    authorization: str | None = None  # this process's own; never in options, messages or results
    summary: str = ""
    # Built on first use, from this run's settings: --dataset's, and a locustfile's own.
    workloads: dict[str, Workload | Sessions | Trace] = field(default_factory=dict)
    quota: Quota | None = None  # what the users of this process may still send
    tickets: Tickets | WorkerTickets | None = None  # the pool (master, local) or a worker's supply
    user_numbers: Iterator[int] = field(default_factory=count)  # for the users' arrival seeds
    tokenize_works: bool | None = None  # whether the server's /tokenize counts output tokens; None: untried
    told_no_engine_account: bool = False
    told_unknown_replica: bool = False
    replica_watch: ReplicaWatch | None = None  # a fleet's, on the master or a local runner with the sidecar
    told_not_found: bool = False
    # What ends a run that counts its requests, looked at again after a trace entry is skipped (no
    # request event follows one): the local runner's; a worker's skips reach its master in its reports.
    done_check: Callable[[], None] = lambda: None
    _building: Semaphore = field(default_factory=Semaphore)
    _probing: Semaphore = field(default_factory=Semaphore)
    replicas: ReplicaNames = field(init=False)  # --replica's, read once per options: replica_of runs per request

    def __post_init__(self) -> None:
        self.replicas = self.settings.replica_names()

    @property
    def recorder(self) -> Recorder:
        return self.state.recorder

    def refresh(self, options) -> None:
        """The web UI (and a master, for its workers) may have changed options since init."""
        try:
            self.settings = settings_from(options)
            self.replicas = self.settings.replica_names()
        except ValueError as exc:
            log.error("%s; this run keeps the previous options", exc)

    def new_run(self, options) -> None:
        """What every process does as a run starts: this run's options, a fresh workload and seeds."""
        self.refresh(options)
        self.workloads = {}
        self.user_numbers = count()
        settings = self.settings
        self.recorder.configure(settings.slo, settings.requests_path is not None, settings.record_itl)
        self.state.default_stage = settings.stage_name
        self.state.run_name = settings.run_name

    def counted(self) -> bool:
        """Whether the run counts its requests: --num-requests or --warmup-requests."""
        return self.settings.num_requests is not None or self.settings.warmup_requests > 0

    def request_rate(self) -> float:
        """The open loop's rate now: --request-rate, or the load shape's level at this moment."""
        schedule = self.state.schedule
        if schedule:
            return level_now(schedule, self.state.load_started(), time.time())
        return self.settings.request_rate or 0.0

    @property
    def run_quota(self) -> Quota:
        """What this process's users may still send in the run under way; set as it starts, before any user."""
        if self.quota is None:
            raise RuntimeError("a user sent before the run started")
        return self.quota

    def without_engine_account(self, origin: str) -> None:
        """A request came back without the engine's own account of it: say so once per process."""
        if not self.told_no_engine_account:
            self.told_no_engine_account = True
            log.warning("%s sends no per-request metrics: records carry the client's figures only (vLLM 0.32 "
                        "sends them with --enable-per-request-metrics; docs/guides/slow-requests.md)",
                        origin)

    def replica_of(self, served_by: str | None, routed_to: str | None = None) -> str | None:
        """The replica that served a request: the one whose URL (--replica NAME=URL) the router named in
        its answer's headers (`routed_to`: smg's), else the one its system_fingerprint names; None
        outside a fleet, or where neither names one of --replica's replicas (said once)."""
        names = self.replicas
        if not names:
            return None
        routed = names.routed(routed_to) if routed_to else None
        if routed is not None:
            return routed
        if served_by is None:
            return None
        if names.name(served_by):
            return served_by
        if not self.told_unknown_replica:
            self.told_unknown_replica = True
            log.warning("An answer's system_fingerprint is %r, none of the replicas' names (%s): their requests "
                        "carry no replica. Start each replica with --fingerprint-mode custom --fingerprint-value "
                        "NAME, or put smg in front of them with --replica NAME=URL (docs/guides/fleet.md)",
                        served_by, ", ".join(sorted(names.exact) + list(names.patterns)))
        return None

    def not_found(self, environment, url: str, message: str) -> None:
        """The server answered 404 Not Found to the streamed API: it has no such API (another
        --endpoint) or no such model. Said once, and the run ends (headless, with the bad-input
        exit code) rather than measure nothing but failures; what was sent is counted and written."""
        if not self.told_not_found:
            self.told_not_found = True
            log.error("loadwatch: POST %s answered 404 Not Found (%s): the server has no such API or model; "
                      "check --endpoint and --model", url, message)
            environment.process_exit_code = 2
            # From the web UI the run stops and the UI stays, to choose another endpoint there.
            gevent.spawn(environment.runner.stop if environment.web_ui else environment.runner.quit)

    def count_output_tokens(self, streamer: Streamer, model: str | None, text: str) -> tuple[int, str]:
        """Output tokens of a stream that carried no usage, and how they were counted: with the
        server's /tokenize (as vllm bench serve counts with the tokenizer), else approximated."""
        with self._probing:  # the probe yields: one user probes, the others wait for its answer
            if self.tokenize_works is None:
                self.tokenize_works = self._probe_tokenize(streamer, model)
        if self.tokenize_works:
            try:
                return ServerTokenizer(streamer, model).count(text), "tokenize"
            except (RequestFailed, KeyError, TypeError, ValueError):
                pass
        return ApproximateTokenizer().count(text), "approximation"

    def _probe_tokenize(self, streamer: Streamer, model: str | None) -> bool:
        works = isinstance(tokenizer_for(streamer, model), ServerTokenizer)
        log.warning("%s sent no usage (stream_options.include_usage is ignored): output tokens are counted "
                    "%s; the results say so under output_tokens_counted_by", streamer.origin,
                    "with its /tokenize" if works else "approximately (4 characters a token)")
        return works

    def dataset_name(self, default: str | None) -> str:
        """The dataset a user sends: --dataset, or its locustfile's `dataset` where the option was left at
        its default."""
        unset = self.settings.dataset == LoadSettings.model_fields["dataset"].default
        return default if default is not None and unset else self.settings.dataset

    def dataset_workload(self, streamer: Streamer, model: str | None, default: str | None = None,
                         worker: int = 0, workers: int = 1) -> Workload | Sessions | Trace:
        """The --dataset of this run (a locustfile's own `dataset` where the option names none but
        the default), built once per process and dataset by the first user that asks (`worker`:
        this process's index among the run's `workers`)."""
        settings = self.settings.model_copy(update={"dataset": self.dataset_name(default)})
        with self._building:
            if settings.dataset not in self.workloads:
                if settings.dataset != self.settings.dataset:  # the options' own was checked with them
                    settings = validate(settings)
                tokenizer = tokenizer_for(streamer, model) if DATASETS[settings.dataset].tokenized else None
                workload = build(settings, tokenizer)
                if isinstance(workload, Cycle | ImagePrompts | Sessions):
                    workload.share(worker, workers)
                if isinstance(workload, Trace):
                    fit_trace(streamer, model, workload, settings.num_requests or len(workload.entries),
                              settings.endpoint != "completions", settings.trace_too_long == "refuse")
                else:
                    check_context(streamer, model, list(workload.prompts), settings.max_tokens,
                                  settings.endpoint != "completions", settings.dataset)
                self.workloads[settings.dataset] = workload
            return self.workloads[settings.dataset]


def attach(environment, process: Process) -> None:
    """Keep the process on Locust's environment, the one object everything in a Locust process shares."""
    environment.loadwatch = process


def process_of(environment) -> Process:
    """This Locust process's loadwatch part (set by `attach` at init, before any user or shape runs)."""
    return environment.loadwatch
