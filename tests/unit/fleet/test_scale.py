"""A fleet's replica count (fleet/scale.py): the embedded fleet tells its router which replicas to use
and waits until it lists that many. Running the user's --scale command starts a process:
tests/integration/test_fleet_scale.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadwatch.fleet import scale
from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.routers import RouterError, VllmRouter
from loadwatch.fleet.scale import ScaleError, Scaler, scale_command
from loadwatch.fleet.servers import HERE, USER, FrontRouter, Resizing, Servers

URLS = {"a": "http://127.0.0.1:8001", "b": "http://127.0.0.1:8002", "c": "http://127.0.0.1:8003"}


class Workers:
    """The workers a vllm-router sends to, changed as its worker API would change them."""

    def __init__(self, serving: list[str]):
        self.serving = list(serving)

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(VllmRouter, "workers", lambda _, url, timeout=5.0: sorted(self.serving))
        monkeypatch.setattr(VllmRouter, "add_worker", lambda _, url, worker, timeout=30.0: self.add(worker))
        monkeypatch.setattr(VllmRouter, "remove_worker", lambda _, url, worker, timeout=30.0: self.remove(worker))

    def add(self, worker: str) -> None:
        if worker not in self.serving:
            self.serving.append(worker)

    def remove(self, worker: str) -> None:
        if worker in self.serving:
            self.serving.remove(worker)


def embedded() -> Scaler:
    return Scaler(Servers(owner=HERE, url="http://127.0.0.1:8000", replicas=dict(URLS),
                          router=FrontRouter(program="vllm-router")), timeout=0.2)


def test_the_count_goes_into_the_users_command_quoted():
    assert scale_command("kubectl scale deployment/vllm --replicas={replicas}", 3) == \
        "kubectl scale deployment/vllm --replicas=3"
    options = FleetOptions(scale="scale.sh {replicas}", scale_timeout="2m")
    fleet = Servers(owner=USER, url="http://r:8000", router=FrontRouter(program="vllm-router"),
                    scaling=Resizing.of(options))
    scaler = Scaler.of(fleet, Path("/run"))
    assert (scaler.command, scaler.timeout, str(scaler.log), scaler.embedded, scaler.most) == \
        ("scale.sh {replicas}", 120.0, "/run/scale.log", False, None)


def test_the_embedded_fleet_serves_from_its_first_replicas_and_names_them(monkeypatch):
    workers = Workers(list(URLS.values()))
    workers.install(monkeypatch)
    scaler, said = embedded(), []
    scaler.scale_to(1, said.append)
    assert workers.serving == [URLS["a"]] and scaler.serving_names() == ["a"]
    assert said == ["fleet: scaling to 1 replica"]
    scaler.scale_to(3, said.append)
    assert sorted(workers.serving) == sorted(URLS.values()) and scaler.serving_names() == ["a", "b", "c"]


@pytest.mark.parametrize(("count", "why"), [(0, "one replica at least, not 0"),
                                            (4, "has 3 replicas: start it with --replicas 4")])
def test_a_count_the_embedded_fleet_cannot_serve_is_refused_before_the_router_is_asked(count, why):
    with pytest.raises(ScaleError, match=why):
        embedded().scale_to(count, print)


def test_a_router_that_does_not_list_the_count_in_time_or_refuses_is_a_scale_error(monkeypatch):
    monkeypatch.setattr(scale, "POLL_SECONDS", 0.01)
    Workers([URLS["a"]]).install(monkeypatch)
    monkeypatch.setattr(VllmRouter, "add_worker", lambda *args, **kwargs: None)  # it takes none
    with pytest.raises(ScaleError, match="the router lists 1 replicas after 0.2 s, not 2: http://127.0.0.1:8001"):
        embedded().scale_to(2, print)

    def refuse(*args, **kwargs):
        raise RouterError("vllm-router refused add_worker: HTTP 400")
    monkeypatch.setattr(VllmRouter, "add_worker", refuse)
    with pytest.raises(ScaleError, match="HTTP 400"):
        embedded().scale_to(2, print)
