from types import SimpleNamespace

from loadwatch.loadgen.roles import VERSION, Master


class Runner:
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send_message(self, kind, data, node_id) -> None:
        self.sent.append((kind, data, node_id))


def check(data) -> list[tuple]:
    runner = Runner()
    master = Master(SimpleNamespace(runner=runner), process=None)
    master.check_worker(SimpleNamespace(data=data, node_id="worker-1"))
    return runner.sent


def test_a_worker_of_this_version_stays():
    assert check({"version": VERSION}) == []


def test_a_worker_of_another_version_or_none_is_told_to_quit(caplog):
    assert check({"version": "0.0.1"}) == [("quit", None, "worker-1")]
    assert "runs loadwatch 0.0.1" in caplog.text
    assert check(None) == [("quit", None, "worker-1")]
