"""The master sends away a worker that would not add up: another loadwatch version, or another run
(its own --run-name or locustfile)."""

from types import SimpleNamespace

import pytest

from loadwatch.loadgen.roles import VERSION, Master


class Runner:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send_message(self, kind, data, node_id) -> None:
        self.sent.append((kind, data, node_id))


def check(data, run_name: str = "nightly", locustfile: str = "/srv/load/chat.py") -> list[tuple]:
    runner = Runner()
    environment = SimpleNamespace(runner=runner, parsed_options=SimpleNamespace(locustfile=locustfile))
    master = Master(environment, process=SimpleNamespace(settings=SimpleNamespace(run_name=run_name)))
    master.check_worker(SimpleNamespace(data=data, node_id="worker-1"))
    return runner.sent


QUIT = [("quit", None, "worker-1")]


@pytest.mark.parametrize("data", [
    {"version": VERSION, "run_name": "nightly", "locustfile": "chat.py"},
    {"version": VERSION, "run_name": "", "locustfile": "chat.py"},  # takes the master's run name
    {"version": VERSION, "run_name": "nightly", "locustfile": ""},  # -f -: takes the master's locustfile
])
def test_a_worker_of_this_version_and_run_stays(data):
    assert check(data) == []


def test_a_worker_of_another_version_or_none_is_told_to_quit(caplog):
    assert check({"version": "0.0.1"}) == QUIT
    assert "runs loadwatch 0.0.1" in caplog.text
    assert check(None) == QUIT


def test_a_worker_of_another_run_is_told_to_quit(caplog):
    assert check({"version": VERSION, "run_name": "ab-test", "locustfile": "chat.py"}) == QUIT
    assert "belongs to run 'ab-test', this master to 'nightly'" in caplog.text
    assert check({"version": VERSION, "run_name": "", "locustfile": "sessions.py"}) == QUIT
    assert "runs sessions.py, this master chat.py" in caplog.text
