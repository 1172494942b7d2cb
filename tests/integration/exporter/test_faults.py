"""The sidecar never reports stale truth: every kind of broken target ends each sample in time,
as `up 0` with its reason counted, and the sampler goes on."""

from __future__ import annotations

import random
import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from loadwatch.exporter.collector import EngineCollector
from loadwatch.exporter.normalize import keep
from loadwatch.exporter.sampler import STALE_INTERVALS, Reading, TargetSampler
from loadwatch.exporter.settings import Target
from tests.integration.exporter.fault_target import PAYLOAD, FaultTarget


@pytest.fixture
def target():
    targets: list[FaultTarget] = []

    def start(mode: str = "good") -> FaultTarget:
        targets.append(FaultTarget(mode))
        return targets[-1]

    yield start
    for t in targets:
        t.close()


def sampler_of(url: str, timeout: float = 1.0, interval: float = 0.1) -> TargetSampler:
    return TargetSampler(Target(name="t", url=url), interval=interval, window=5.0, timeout=timeout)


def exposed(samplers: list[TargetSampler]) -> dict[tuple[str, tuple], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(samplers))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.mark.parametrize(("mode", "reason"), [
    ("cut", "protocol"), ("not_http", "protocol"), ("drip", "timeout"), ("drip_headers", "timeout"),
    ("silent", "timeout"), ("redirect", "http_status"), ("huge", "too_large"), ("garbage", "parse"),
])
def test_a_broken_answer_ends_in_time_as_down_with_its_reason(target, mode, reason):
    s = sampler_of(target(mode).url, timeout=1.0)
    began = time.monotonic()
    reading = s.sample_once()
    took = time.monotonic() - began
    assert not reading.up and s.errors[reason] == 1, dict(s.errors)
    assert took < 1.6, f"{mode}: a sample took {took:.1f} s past its 1 s deadline"
    samples = exposed([s])
    assert samples[("loadwatch_engine_up", (("target", "t"),))] == 0
    assert samples[("loadwatch_engine_scrape_errors_total", (("reason", reason), ("target", "t")))] == 1
    assert not [k for k in samples if k[0] == "loadwatch_engine_requests_running"], "a down target serves no series"


def test_an_engine_killed_mid_answer_turns_up_to_0_and_back(target):
    t = target("good")
    s = sampler_of(t.url)
    s.start()
    try:
        deadline = time.monotonic() + 5
        while not s.current().up and time.monotonic() < deadline:
            time.sleep(0.05)
        assert s.current().up
        t.mode = "cut"
        time.sleep(0.5)
        assert not s.current().up and s.errors["protocol"] >= 2  # the sampler lives on
        t.mode = "good"
        time.sleep(0.5)
        assert s.current().up
    finally:
        s.stop()


def test_a_reading_older_than_a_few_intervals_is_served_as_down(target):
    s = sampler_of(target("good").url, timeout=1.0, interval=1.0)
    assert s.sample_once().up
    assert exposed([s])[("loadwatch_engine_up", (("target", "t"),))] == 1
    s.reading = Reading(up=True, duration=0.1, at=time.monotonic() - 1.0 - STALE_INTERVALS * 1.0 - 0.1,
                        families=s.reading.families)
    samples = exposed([s])
    assert samples[("loadwatch_engine_up", (("target", "t"),))] == 0
    assert not [k for k in samples if k[0] == "loadwatch_engine_requests_running"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dead_sampler_thread_is_started_again_by_the_next_scrape(target, monkeypatch, caplog):
    s = sampler_of(target("good").url)
    runs = []

    def dies_once() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("boom")
        TargetSampler.run(s)

    monkeypatch.setattr(s, "run", dies_once)
    s.start()
    s._thread.join(2)
    assert not s._thread.is_alive()
    exposed([s])
    try:
        deadline = time.monotonic() + 3
        while not s.current().up and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(runs) == 2 and s.current().up
        assert "started again" in caplog.text
    finally:
        s.stop()


def test_loopback_targets_are_not_sent_to_a_proxy(target, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    assert sampler_of(target("good").url).sample_once().up


# The lines the sidecar reads (the rest is skipped unparsed): fuzzing them exercises the parser.
READ = b"\n".join(line for line in PAYLOAD.split(b"\n") if keep(line.decode()))


def fuzzed(rng: random.Random) -> bytes:
    """A vLLM payload broken at random: bytes flipped, lines cut, dropped, swapped or repeated."""
    lines = READ.split(b"\n")
    how = rng.randrange(5)
    if how == 0:
        data = bytearray(READ)
        for _ in range(rng.randint(1, 50)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if how == 1:
        return READ[: rng.randrange(len(READ))]
    if how == 2:
        return b"\n".join(line for line in lines if rng.random() > 0.2)
    if how == 3:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i][: rng.randrange(len(lines[i]) + 1)]
        return b"\n".join(lines)
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 400)))


def test_10000_fuzzed_payloads_never_kill_the_sampler_nor_leave_it_up_on_garbage(monkeypatch):
    rng = random.Random(12)
    s = sampler_of("http://127.0.0.1:9")
    payload: list[bytes] = [b""]
    monkeypatch.setattr(s, "fetch", lambda: payload[0].decode("utf-8", "replace"))
    ups = 0
    for i in range(10_000):
        payload[0] = fuzzed(rng)
        reading = s.sample_once()  # never raises
        ups += reading.up
        if not reading.up:
            assert not reading.families
        if i % 50 == 0:
            exposed([s])  # and what it holds can be served
    assert sum(s.errors.values()) + ups == 10_000
    assert s.errors["internal"] == 0, "every failure has a named reason"
    assert 0 < ups < 10_000  # some broken payloads still parse (a dropped comment line), most do not
