"""The load generator's settings: the one declaration of every loadwatch option of Locust.

Each field is an option: its default, constraints and choices (a Literal) are the field's, its
help is the field's description, and `cli(...)` metadata says how it appears on Locust's parser
(environment variable, web-UI visibility). No field holds a secret: each process reads secrets
from its own environment (`loadwatch.credentials`), so they never travel with the options.
`loadgen/options.py` generates the parser options from these fields; Locust's parser reads the
command line, LOCUST_* variables and locust.conf, and `from_options` validates what it found: the
rest of the code reads this object.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from loadwatch.client.endpoints import Endpoint, streams
from loadwatch.credentials import REDACTED
from loadwatch.defaults import LOOPBACK, PORTS
from loadwatch.metrics.slo import Objective

# What loadwatch writes into each request itself: --extra-body may not override it.
OWN_BODY_FIELDS = frozenset({"model", "messages", "prompt", "max_tokens", "stream", "stream_options", "temperature",
                             "ignore_eos"})
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization"})
Shape = Literal["step", "ramp", "spike", "sweep"]
PATTERN = re.compile(r"[*?[]")  # a --replica name with these is a pattern of names
# vLLM's own fingerprints (modes full and hash: vllm-<version>-...): the same on every replica of one
# configuration, so never a replica's name, even where a pattern would match it.
VLLM_FINGERPRINT = re.compile(r"vllm-\d+\.\d+")


@dataclass(frozen=True)
class ReplicaNames:
    """--replica's names: exact names, and shell-style patterns (`*`, `vllm-*`) for a fleet whose replicas
    come and go, each named by the fingerprint it was started with (Kubernetes: the pod's name)."""

    exact: frozenset[str]
    patterns: tuple[str, ...] = ()
    # --replica NAME=URL's, by URL (no trailing /): a router that names the replica it sent to by its
    # URL (smg) names it so
    urls: dict[str, str] = field(default_factory=dict, hash=False)

    def __bool__(self) -> bool:
        return bool(self.exact or self.patterns)

    def name(self, fingerprint: str) -> bool:
        """Whether an answer's fingerprint names a replica of the fleet."""
        return fingerprint in self.exact or (
            not VLLM_FINGERPRINT.match(fingerprint) and any(fnmatchcase(fingerprint, p) for p in self.patterns))

    def routed(self, url: str) -> str | None:
        """The replica whose URL a router named, where --replica gave it that URL."""
        return self.urls.get(url.rstrip("/"))

    def listed(self, seen: set[str] | frozenset[str]) -> frozenset[str]:
        """The replicas to report: every exact name (one that served nothing too), and those seen that a
        pattern names."""
        return self.exact | {name for name in seen if self.name(name)}
AgentPrefix = Literal["static", "dynamic"]
TraceFormatName = Literal["auto", "mooncake", "azure", "weka", "otel"]
TooLong = Literal["skip", "refuse"]
DatasetFormat = Literal["auto", "loadwatch", "guidellm", "aiperf"]


def split_models(value: str, skew: float = 0.0) -> list[tuple[str, float]]:
    """`a=0.7,b=0.3` as [(a, 0.7), (b, 0.3)]; `a,b,c` as Zipf's shares with exponent `skew`, in the
    order named (the k-th 1/k**skew: 0 even, 1 the first twice the second's), as real tenants'
    traffic over LoRA adapters is skewed; ValueError naming a broken part."""
    parts = [part.strip() for part in value.split(",")]
    shared = ["=" in part for part in parts]
    if any(shared) and not all(shared):
        raise ValueError(f"{value!r} mixes NAME=SHARE with bare names: give every share, or none (with "
                         "--model-skew)")
    split = []
    for rank, part in enumerate(parts, 1):
        name, _, weight = part.partition("=")
        try:
            share = float(weight) if any(shared) else 1 / rank**skew
        except ValueError:
            share = -1.0
        if not name.strip() or not share > 0:
            raise ValueError(f"{part!r} is not NAME=SHARE with a share above 0 (a=0.7,b=0.3)")
        split.append((name.strip(), share))
    if len({name for name, _ in split}) < len(split):
        raise ValueError("a model is named twice")
    return split


def cli(env: str | None = None, web_ui: bool = True) -> dict[str, Any]:
    """How a field appears on Locust's parser; env defaults to LOCUST_<NAME>. Paths are never web-UI
    fields: whoever reaches the UI must not choose what the master reads or writes."""
    return {"cli": {"env": env, "web_ui": web_ui}}


def records_beside(results: Path) -> Path:
    """Where a run with --results-json NAME.json writes its records: NAME.requests.jsonl."""
    return results.with_name(results.stem + ".requests.jsonl")


def partial_beside(results: Path) -> Path:
    """Where a run with --results-json NAME.json keeps its checkpoint: NAME.partial.json."""
    return results.with_name(results.stem + ".partial.json")


# LoadSettings' fields in groups, each from the field that opens it on: how `loadwatch options` and
# the options reference list them.
OPTION_GROUPS = {"model": "The request", "run_name": "The run", "dataset": "The workload"}


class LoadSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", protected_namespaces=())

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings):
        """Only what Locust's parser found (the command line, LOCUST_* variables, locust.conf): no
        LOADWATCH_* variable may set an option behind the user's back."""
        return (init_settings,)

    model: str = Field("", description="Model to request; default: the first one the server lists at /v1/models. "
                                       "NAME=SHARE,NAME=SHARE splits the traffic across models or LoRA adapters "
                                       "(shares are weights), the model label following each request; "
                                       "NAME,NAME,... splits it by --model-skew")
    model_skew: float = Field(0.0, ge=0, description="A split NAME,NAME,... of --model as Zipf's law: the k-th "
                                                     "model named gets a share of 1/k^SKEW (0: even; 1: the first "
                                                     "twice the second's, as tenants' traffic over LoRA adapters)")
    endpoint: Endpoint = Field("chat", description="OpenAI API to send to: /v1/chat/completions, /v1/completions "
                                                   "or /v1/responses (streamed), /v1/embeddings or vLLM's /rerank "
                                                   "(one answer, timed whole)")
    inputs_per_request: int = Field(1, gt=0, description="Embeddings: texts per request; rerank: documents per "
                                                         "query")
    max_tokens: int = Field(128, gt=0, description="max_tokens of each request")
    temperature: float | None = Field(None, ge=0, description="Sampling temperature; default: the server's")
    ignore_eos: bool = Field(False, description="Ask vLLM to generate max_tokens whatever the model says "
                                                "(vLLM's ignore_eos)")
    api_key_file: Path | None = Field(None, json_schema_extra=cli(web_ui=False),
                                      description="File holding the server's bearer token; default: "
                                                  "$OPENAI_API_KEY_FILE, else $OPENAI_API_KEY. Each process "
                                                  "(master, every worker) reads its own")
    extra_body: dict[str, Any] = Field({}, description="JSON object merged into every request's body: "
                                                        "chat_template_kwargs, response_format, top_p, top_k, "
                                                        "seed, ... (not what loadwatch sets itself)")
    header: list[str] = Field([], json_schema_extra=cli(web_ui=False),
                              description="Header of every request, NAME:VALUE, repeatable (not Authorization: "
                                          "the key comes from $OPENAI_API_KEY)")
    replica: list[str] = Field([], json_schema_extra=cli(web_ui=False),
                               description="A replica behind the router, NAME or NAME=URL, repeatable: each "
                                           "request's record names the replica that served it, which vLLM "
                                           "says in system_fingerprint when started with --fingerprint-mode "
                                           "custom --fingerprint-value NAME (docs/guides/fleet.md), and smg "
                                           "by the URL in its x-smg-routed-worker-id header (NAME=URL). A "
                                           "pattern ('*', 'vllm-*') takes every name it matches: replicas "
                                           "that come and go, such as Kubernetes pods")
    request_timeout: float = Field(600.0, gt=0, description="Seconds a whole streamed request may take before it "
                                                            "counts as a timeout")
    max_line_bytes: int = Field(2**20, ge=1024, json_schema_extra=cli(web_ui=False),
                                description="Longest line a stream may send, in bytes; a longer one fails the "
                                            "request as malformed_chunk")
    metrics_port: int = Field(PORTS["client_metrics"], ge=0, le=65535, json_schema_extra=cli(web_ui=False),
                              description="Port of the Prometheus endpoint of the master or local runner; "
                                          "0 turns it off")
    metrics_host: str = Field(LOOPBACK, json_schema_extra=cli(web_ui=False),
                              description="Address the Prometheus endpoint listens on: this machine only by "
                                          "default; 0.0.0.0 opens it to the network")
    engine_metrics: str = Field("", json_schema_extra=cli(web_ui=False),
                                description="The engine's /metrics (the sidecar's, or vLLM's own) for the web UI's "
                                            "LLM charts, read by the master every 2 s; loadwatch run, up and "
                                            "capacity set it")
    results_json: Path | None = Field(None, json_schema_extra=cli(web_ui=False),
                                      description="Write the run's results (vllm bench serve keys and "
                                                  "loadwatch's own) to this file")
    requests_file: Path | None = Field(None, json_schema_extra=cli(web_ui=False),
                                       description="Per-request records, one JSON line each, written as they "
                                                   "finish; default: NAME.requests.jsonl beside "
                                                   "--results-json NAME.json")
    record_itl: bool = Field(False, json_schema_extra=cli(web_ui=False),
                             description="Put each request's inter-token gaps in its record too")
    checkpoint_interval: float = Field(10.0, gt=0, json_schema_extra=cli(web_ui=False),
                                       description="Seconds between refreshes of NAME.partial.json beside "
                                                   "--results-json during a run")
    price_per_hour: float | None = Field(None, gt=0, description="the server's cost, $ an hour (of one GPU with "
                                                                 "--gpus): $ per 1M output and total tokens in the "
                                                                 "results")
    gpus: int = Field(1, gt=0, description="GPUs the server runs on, when --price-per-hour is a GPU's")
    slo: list[Objective] = Field([], description="Service-level objective, repeatable: ttft_p99_ms=500, "
                                           "tpot_median_ms=50, e2el_p90_ms=20000, failure_ratio=0.01, "
                                           "rejected_ratio=0.01 (comma-separated in the web UI). A broken one "
                                           "makes a headless run exit 3")
    run_name: str = Field("", pattern=r"^[A-Za-z0-9._/-]*$", json_schema_extra=cli(web_ui=False),
                          description="Start of the run's id (run_info's run_id label, the results): "
                                      "loadwatch experiment names each cell so")
    request_rate: float | None = Field(None, gt=0, description="Open loop: requests per second over the whole "
                                                               "run, sent whether or not earlier ones have "
                                                               "answered; each user is an arrival process of "
                                                               "rate/users")
    burstiness: float = Field(1.0, gt=0, description="Open loop: gamma shape of the gaps; 1 is Poisson, lower is "
                                                     "burstier")
    max_concurrency: int | None = Field(None, gt=0, description="Open loop: requests in flight at most; an "
                                                                "arrival over it is dropped and counted")
    cancel_ratio: float = Field(0.0, ge=0, le=1, description="Share of requests the client hangs up on, closing "
                                                            "the stream (with --cancel-after or --cancel-after-tokens)"
                                                            ": counted as cancelled, neither success nor failure")
    cancel_after: float | None = Field(None, gt=0, description="Seconds after sending that a cancelled request "
                                                               "hangs up")
    cancel_after_tokens: int | None = Field(None, gt=0, description="Chunks of output after which a cancelled "
                                                                    "request hangs up")
    num_requests: int | None = Field(None, gt=0, description="Stop after exactly this many measured requests, "
                                                             "across all workers (vllm bench serve's "
                                                             "--num-prompts)")
    warmup_requests: int = Field(0, ge=0, description="Send this many requests first and leave them out of "
                                                      "every figure")
    warmup_seconds: float = Field(0.0, ge=0, description="Leave out the requests started in the first seconds "
                                                         "of the run")
    shape: Shape | None = Field(None, json_schema_extra=cli(web_ui=False),
                                description="Load shape, stage by stage: step (up to -u users, or "
                                            "--request-rate, in --step-size steps), ramp (0 to peak, then "
                                            "hold), spike (base, peak, base) or sweep (--sweep levels)")
    stage_duration: float = Field(60.0, gt=0, description="Seconds each stage of --shape lasts")
    stage_name: str = Field("load", min_length=1, json_schema_extra=cli(web_ui=False),
                            description="Stage of a run without --shape, in the run_info series and the records "
                                        "(loadwatch capacity names its levels so)")
    step_size: float | None = Field(None, gt=0, description="step: users (or requests/s) added at each step; "
                                                            "default a quarter of the peak")
    spike_base: float | None = Field(None, gt=0, description="spike: users (or requests/s) before and after the "
                                                             "spike; default a quarter of the peak")
    sweep: list[float] = Field([], description="sweep: comma-separated levels, one stage each: user counts, or "
                                               "request rates with --request-rate")
    # The choices are workloads/datasets.py's classes, a layer above: loadgen/options.py lists them.
    dataset: str = Field("builtin", description="Workload")
    dataset_path: Path | None = Field(None, json_schema_extra=cli(web_ui=False),
                                      description="Dataset file; default: loadwatch's own sample where the dataset "
                                                  "has one; sessions: generated unless given (ShareGPT JSON, or "
                                                  "JSON Lines of {\"turns\": [...]})")
    seed: int = Field(0, description="Seed of the dataset's sampling and order")
    dataset_size: int = Field(1000, gt=0, description="Prompts drawn from the dataset (then served in a cycle)")
    sharegpt_output_len: int | None = Field(None, gt=0, description="sharegpt: fixed max_tokens instead of the "
                                                                    "first answer's token length")
    input_len: int = Field(1024, gt=0, description="random: prompt tokens")
    output_len: int | None = Field(None, gt=0, description="random, prefix-repetition, agent: max_tokens; "
                                                           "default --max-tokens")
    range_ratio: float = Field(0.0, ge=0, lt=1, description="random: lengths drawn uniformly within +-ratio of "
                                                            "the mean")
    images_per_request: int = Field(1, ge=0, description="random-mm: synthetic images in each request")
    image_size: str = Field("256x256", pattern=r"^[1-9][0-9]*x[1-9][0-9]*$",
                            description="random-mm: WIDTHxHEIGHT of each image, in pixels")
    prefix_len: int = Field(0, ge=0, description="random: shared prefix tokens; prefix-repetition: tokens of "
                                                 "each prefix (default 256)")
    num_prefixes: int = Field(10, gt=0, description="prefix-repetition: distinct shared prefixes")
    suffix_len: int = Field(256, gt=0, description="prefix-repetition: unique tokens after the prefix")
    agent_prefix: AgentPrefix = Field("static", description="agent, sessions: the same date-time at the start "
                                                            "for every request (cacheable) or a new one per "
                                                            "request")
    turns: int | None = Field(None, gt=0, description="sessions: turns (requests) per conversation; default 5 "
                                                      "generated, a file's own user turns")
    think_time: float = Field(0.0, ge=0, description="sessions: seconds a user waits between a turn's answer "
                                                     "and its next turn")
    turn_len: int = Field(64, gt=0, description="sessions, generated: tokens of each user turn and tool result")
    system_len: int = Field(512, ge=0, description="sessions, generated: tokens of the system prompt every "
                                                   "conversation shares")
    dataset_format: DatasetFormat = Field("auto", description="jsonl: the file's format: loadwatch, guidellm "
                                                               "(JSONL or CSV) or aiperf; auto: as the file shows")
    speedup: float = Field(1.0, gt=0, description="trace: replay K times faster than the trace's own times")
    trace_block_tokens: int = Field(512, gt=0, description="trace: tokens of the prompt block each hash id stands "
                                                           "for (512 in Mooncake's traces; a WEKA trace gives its own)")
    trace_format: TraceFormatName = Field("auto", description="trace: the file's format: mooncake, azure, weka "
                                                              "or otel; auto: as the file shows")
    trace_too_long: TooLong = Field("skip", description="trace: entries that cannot fit the server's context are "
                                                        "skipped, counted and named (skip), or the trace is "
                                                        "refused (refuse)")
    tools: str = Field("", json_schema_extra=cli(web_ui=False),
                       description="JSON file of OpenAI tool definitions sent with every chat request; "
                                   "sessions: loadwatch's sample tools unless given; none: no tools")

    @field_validator("slo", mode="before")
    @classmethod
    def _split_slos(cls, value: object) -> object:
        # One text holds several, comma-separated, from the web UI or $LOCUST_SLO; each is parsed as an Objective.
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list):
            return items  # pydantic says what is wrong with it
        return [v.strip() if isinstance(v, str) else v for v in items if v != ""]

    @field_validator("extra_body", mode="before")
    @classmethod
    def _parse_extra_body(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not JSON: {exc}") from None
        if isinstance(value, dict):
            taken = sorted(set(value) & OWN_BODY_FIELDS)
            if taken:
                raise ValueError(f"{', '.join(taken)}: set by loadwatch (its own options, or what streaming "
                                 "measurement needs)")
        return value

    @field_validator("model")
    @classmethod
    def _check_split(cls, value: str) -> str:
        if "=" in value or "," in value:
            split_models(value)
        return value

    def models(self) -> list[tuple[str, float]]:
        """The traffic split of --model, [(name, weight)]; one model (or none: the server's first) is []."""
        return split_models(self.model, self.model_skew) if "=" in self.model or "," in self.model else []

    @field_validator("header", mode="before")
    @classmethod
    def _parse_headers(cls, value: object) -> object:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list):
            return items
        for item in items:
            name, sep, _ = str(item).partition(":")
            if not sep or not name.strip():
                raise ValueError(f"{item!r} is not NAME:VALUE")
            if name.strip().lower() in CREDENTIAL_HEADERS:
                raise ValueError(f"{name.strip()} is not given on the command line: put the key in "
                                 "$OPENAI_API_KEY, or in a file named by --api-key-file")
        return items

    @field_validator("replica", mode="before")
    @classmethod
    def _parse_replicas(cls, value: object) -> object:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list):
            names = [str(item).partition("=")[0].strip() for item in items]
            if not all(names) or len(set(names)) != len(names):
                raise ValueError(f"replicas need a name each, and names once: {items}")
            if any(PATTERN.search(name) and "=" in str(item) for name, item in zip(names, items, strict=True)):
                raise ValueError(f"a pattern (with * ? or [) names the replicas by their fingerprints and takes no "
                                 f"URL: {items}")
        return items

    def replica_names(self) -> ReplicaNames:
        names = [item.partition("=")[0].strip() for item in self.replica]
        return ReplicaNames(frozenset(n for n in names if not PATTERN.search(n)),
                            tuple(n for n in names if PATTERN.search(n)),
                            {url.strip().rstrip("/"): name.strip()
                             for name, _, url in (item.partition("=") for item in self.replica) if url.strip()})

    def headers(self) -> dict[str, str]:
        return {name.strip(): value.strip() for name, _, value in (h.partition(":") for h in self.header)}

    @field_validator("sweep", mode="before")
    @classmethod
    def _parse_sweep(cls, value: object) -> object:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    @model_validator(mode="after")
    def _one_way_to_hang_up(self) -> LoadSettings:
        ways = (self.cancel_after is not None) + (self.cancel_after_tokens is not None)
        if self.cancel_ratio > 0 and ways != 1:
            raise ValueError("--cancel-ratio needs one of --cancel-after SECONDS or --cancel-after-tokens N")
        if ways and self.cancel_ratio == 0:
            raise ValueError("--cancel-after and --cancel-after-tokens need --cancel-ratio R (the share cancelled)")
        if self.cancel_after_tokens is not None and not streams(self.endpoint):
            raise ValueError(f"--cancel-after-tokens needs a streamed endpoint: {self.endpoint} sends no tokens")
        return self

    @classmethod
    def from_options(cls, options: object) -> LoadSettings:
        # The web UI hands back an empty field as "": that means not given.
        given = {name: getattr(options, name, None) for name in cls.model_fields}
        return cls(**{name: value for name, value in given.items() if value not in (None, "")})

    @property
    def requests_path(self) -> Path | None:
        if self.requests_file is not None:
            return self.requests_file
        return None if self.results_json is None else records_beside(self.results_json)

    @property
    def checkpoint_path(self) -> Path | None:
        return None if self.results_json is None else partial_beside(self.results_json)

    def public_options(self) -> dict:
        """The options of a run as they are written down with its results."""
        options = self.model_dump(mode="json")
        options["header"] = [f"{name}: {REDACTED}" for name in self.headers()]  # a value may be a token
        return options
