"""A level's peaks per replica and per data-parallel rank, from one query per figure."""

from __future__ import annotations

from loadwatch.report.engine import server_peaks


class Prometheus:
    """Answers every peak query with the same series: target a with ranks 0 and 1, target b with one."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def query(self, expr: str, at: float) -> list[dict]:
        self.asked.append(expr)
        values = {("a", "0"): "6", ("a", "1"): "0", ("b", "0"): "NaN"}
        return [{"metric": {"target": t, "engine": e}, "value": [at, v]} for (t, e), v in values.items()]


def test_a_replica_peaks_at_its_busiest_rank_and_only_servers_of_several_ranks_are_listed_by_rank():
    api = Prometheus()
    replicas, ranks = server_peaks(api, 100.0, 130.0)
    assert replicas["a"]["requests_waiting_peak"] == 6.0 and replicas["b"]["requests_waiting_peak"] is None
    assert set(ranks) == {"a"} and ranks["a"]["1"]["requests_waiting_peak"] == 0.0
    assert len(api.asked) == len(replicas["a"]), "one query per figure, not one per view"
    assert all("max by (target, engine)" in expr for expr in api.asked)
