"""A distributed run across real hosts (network namespaces, tests/hosts.py): the server on one, the
master on another, `--worker --processes 2` on each of two load hosts. Exact across them; and a
load host whose link is cut mid-run is lost, said so, and its requests counted as unknown (issue 40)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loadwatch.loadgen.workers import LOST_WITHIN
from tests.conftest import REPO, wait_for
from tests.hosts import Hosts, HostsUnavailable

LOAD_HOSTS = ("load1", "load2")
SERVER_PORT, MASTER_PORT, WEB_PORT, METRICS_PORT = 8000, 5557, 8089, 9646
SKEW = 2.0  # seconds one load host's clock is ahead
# Seconds from a request's send to the server's stamp, at most, on a busy machine: a median of 0.4 ms,
# but a worker's greenlet can be held between its stamp and its send (143 ms seen on a quiet machine).
# Half the skew: a record left uncorrected would be 2 s off.
NETWORK = 1.0
PYTHON = sys.executable


@pytest.fixture
def hosts():
    made: list[Hosts] = []

    def make(*names: str) -> Hosts:
        try:
            made.append(Hosts(*names).__enter__())
        except HostsUnavailable as exc:
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI must run the multi-host tests: {exc}")
            pytest.skip(str(exc))
        return made[-1]

    yield make
    for h in made:
        h.__exit__(None, None, None)


def fetch(hosts: Hosts, on: str, url: str) -> str:
    """GET `url` from host `on` (this machine's namespace reaches none of them); "" while it does not answer."""
    done = subprocess.run(hosts.command(on, [PYTHON, "-c", f"import urllib.request; print(urllib.request.urlopen("
                                                           f"{url!r}, timeout=10).read().decode())"]),
                          capture_output=True, text=True, timeout=60)
    return done.stdout if done.returncode == 0 else ""


def state(hosts: Hosts, web: str) -> str | None:
    page = fetch(hosts, "master", f"{web}/stats/requests")
    return json.loads(page)["state"] if page else None


def start(hosts: Hosts, tmp_path: Path, *master_args: str, skewed: str | None = None,
          late: float = 0.0) -> tuple[str, object]:
    """The server, the master and two load hosts' workers; the server's URL and the master process.
    The workers of host `skewed` run with their wall clock SKEW ahead (libfaketime; their monotonic
    clock left alone, as durations are measured on it). The last load host joins `late` seconds after
    the first."""
    server = f"http://{hosts.address('server')}:{SERVER_PORT}"
    hosts.popen("server", [PYTHON, str(REPO / "tests" / "sse_server.py"), "--host", hosts.address("server"),
                           "--port", str(SERVER_PORT), "--ttft", "0.02", "--itl", "0.005", "--tokens", "5"],
                tmp_path / "server.log")
    wait_for(lambda: "listening on" in (tmp_path / "server.log").read_text(), 30, "the server on its host")
    master_address = hosts.address("master")
    master = hosts.popen("master", [
        PYTHON, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "--master", "-H", server,
        "--master-bind-host", master_address, "--master-bind-port", str(MASTER_PORT),
        "--expect-workers", "2" if late else "4",
        "--metrics-host", master_address, "--metrics-port", str(METRICS_PORT),
        "--results-json", str(tmp_path / "results.json"), *master_args], tmp_path / "master.log")
    for name in LOAD_HOSTS:
        if name == LOAD_HOSTS[-1] and late:
            time.sleep(late)
        faked = ["faketime", "-f", f"+{SKEW:g}s"] if name == skewed else []
        hosts.popen(name, [*faked, PYTHON, "-m", "locust", "-f", str(REPO / "locustfiles" / "chat.py"), "--worker",
                           "--master-host", master_address, "--master-port", str(MASTER_PORT), "--processes", "2"],
                    tmp_path / f"{name}.log", env={**os.environ, "FAKETIME_DONT_FAKE_MONOTONIC": "1"})
    return server, master


def records(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "results.requests.jsonl").read_text().splitlines()]


def test_a_master_and_workers_on_three_hosts_count_every_request_once(hosts, tmp_path):
    h = hosts("server", "master", *LOAD_HOSTS)
    n = 240
    server, master = start(h, tmp_path, "--autostart", "--web-host", h.address("master"), "--web-port",
                           str(WEB_PORT), "-u", "8", "-r", "8", "--num-requests", str(n))
    web = f"http://{h.address('master')}:{WEB_PORT}"
    wait_for(lambda: state(h, web) == "stopped", 120,
             f"the run to stop after {n} requests; master log:\n{(tmp_path / 'master.log').read_text()[-2000:]}")
    # The master's test_stop (stage `stopped`) follows its `stopped` state by up to a second.
    wait_for(lambda: 'stage="stopped"' in fetch(h, "master", f"http://{h.address('master')}:{METRICS_PORT}/metrics"),
             10, "the run's stop")
    page = fetch(h, "master", f"http://{h.address('master')}:{METRICS_PORT}/metrics")
    arrivals = json.loads(fetch(h, "server", f"{server}/stats"))["arrivals"]
    master.terminate()  # a run ended by --num-requests leaves the web UI up: SIGTERM writes its results
    master.wait(60)
    served = sum(float(line.rsplit(" ", 1)[1]) for line in page.splitlines()
                 if line.startswith("loadwatch_client_requests_total{"))
    data = json.loads((tmp_path / "results.json").read_text())
    kept = records(tmp_path)
    assert arrivals == n == served == data["completed"] + data["failed"] == len(kept), (arrivals, served)
    by_host: dict[str, set[str]] = {}
    for record in kept:
        by_host.setdefault(record["worker"].rpartition("_")[0], set()).add(record["worker"])
    assert {host: len(workers) for host, workers in by_host.items()} == {"load1": 2, "load2": 2}
    assert data["lost_workers"] == [] and data["unknown_outcomes"] == 0


def test_a_load_host_cut_off_mid_run_is_lost_and_its_requests_unknown(hosts, tmp_path):
    h = hosts("server", "master", *LOAD_HOSTS)
    server, master = start(h, tmp_path, "--headless", "-u", "8", "-r", "8", "-t", "15s", "--stop-timeout", "2")
    wait_for(lambda: (page := fetch(h, "server", f"{server}/stats")) and json.loads(page)["arrivals"] > 50, 60,
             "the load under way")
    time.sleep(3)
    h.cut("load2")
    assert master.wait(120) == 1, (tmp_path / "master.log").read_text()[-3000:]
    output = (tmp_path / "master.log").read_text()
    h.mend("load2")
    arrivals = json.loads(fetch(h, "server", f"{server}/stats"))["arrivals"]
    data = json.loads((tmp_path / "results.json").read_text())
    assert {w["host"] for w in data["lost_workers"]} == {"load2"} and len(data["lost_workers"]) == 2, output[-3000:]
    accounted, unknown = data["completed"] + data["failed"], data["unknown_outcomes"]
    kept = records(tmp_path)
    assert {r["worker"].rpartition("_")[0] for r in kept} == set(LOAD_HOSTS)
    load2 = sorted(r["start"] for r in kept if r["worker"].startswith("load2_"))
    rate = len(load2) / (load2[-1] - load2[0])
    print(f"server saw {arrivals}, the results account for {accounted}, unknown {unknown}; load2 sent {rate:.0f}/s")
    # High rather than low, by load2's rate over the seconds from its cut to when it is counted lost: at
    # most LOST_WITHIN after its last heartbeat, which Locust's count places within a second, more on a
    # busy master. A ratio to the truth cannot bound it: a cut just after a report leaves little unknown
    # (25, estimated 164, in one CI run), while counting it to the run's end, some 10 s on, would be well over.
    assert accounted < arrivals <= accounted + unknown <= arrivals + rate * (LOST_WITHIN + 2) + 2
    assert "on host load2 is lost" in output and "Incomplete:" in output and "Traceback" not in output


def test_a_load_host_whose_link_comes_back_before_the_stop_is_not_lost(hosts, tmp_path):
    """Its heartbeats stop (Locust marks its workers missing after 3 s) and resume: its last reports
    come, and every request is counted once."""
    h = hosts("server", "master", *LOAD_HOSTS)
    server, master = start(h, tmp_path, "--headless", "-u", "8", "-r", "8", "-t", "20s", "--stop-timeout", "2")
    wait_for(lambda: (page := fetch(h, "server", f"{server}/stats")) and json.loads(page)["arrivals"] > 50, 60,
             "the load under way")
    h.cut("load2")
    time.sleep(6)
    h.mend("load2")
    assert master.wait(120) == 0, (tmp_path / "master.log").read_text()[-3000:]
    output = (tmp_path / "master.log").read_text()
    arrivals = json.loads(fetch(h, "server", f"{server}/stats"))["arrivals"]
    data = json.loads((tmp_path / "results.json").read_text())
    assert "setting state to missing" in output, output[-3000:]
    assert data["lost_workers"] == [] and data["completed"] + data["failed"] == arrivals == len(records(tmp_path))


def test_a_load_host_silent_for_over_a_minute_is_removed_and_a_counted_run_ends_without_its_tickets(hosts, tmp_path):
    """Locust removes a worker a minute after it goes missing, and the worker itself quits after a
    minute without its master's heartbeat: when the link comes back, nothing of it is left to report.
    The master names it lost at the removal, and a --num-requests run, which would otherwise wait
    for ever for the tickets it holds, ends with them counted as unknown."""
    h = hosts("server", "master", *LOAD_HOSTS)
    n = 4000
    server, master = start(h, tmp_path, "--headless", "-u", "8", "-r", "8", "--num-requests", str(n), "-t", "240s",
                           "--stop-timeout", "2")
    wait_for(lambda: (page := fetch(h, "server", f"{server}/stats")) and json.loads(page)["arrivals"] > 50, 60,
             "the load under way")
    h.cut("load2")
    wait_for(lambda: "on host load2 is lost: silent for a minute" in (tmp_path / "master.log").read_text(), 120,
             "the master to name the host lost as Locust removes its workers")
    h.mend("load2")
    assert master.wait(120) == 1, (tmp_path / "master.log").read_text()[-3000:]
    output = (tmp_path / "master.log").read_text()
    load2 = h.processes[3]
    wait_for(lambda: load2.poll() is not None, 30, "load2's workers to have quit on their own")
    assert "Didn't get heartbeat from master" in (tmp_path / "load2.log").read_text()
    arrivals = json.loads(fetch(h, "server", f"{server}/stats"))["arrivals"]
    data = json.loads((tmp_path / "results.json").read_text())
    accounted, unknown = data["completed"] + data["failed"], data["unknown_outcomes"]
    print(f"server saw {arrivals}, the results account for {accounted}, unknown {unknown}")
    assert {w["host"] for w in data["lost_workers"]} == {"load2"} and len(data["lost_workers"]) == 2, output[-3000:]
    assert accounted + unknown == n  # every ticket dealt is an outcome reported or one unknown
    assert accounted <= arrivals <= n
    assert "is missing (no heartbeat" in output and "Traceback" not in output


@pytest.mark.needs("faketime")
def test_a_load_hosts_clock_two_seconds_ahead_is_measured_and_its_records_corrected(hosts, tmp_path):
    h = hosts("server", "master", *LOAD_HOSTS)
    server, master = start(h, tmp_path, "--headless", "-u", "8", "-r", "8", "-t", "8s", skewed="load2")
    assert master.wait(120) == 0, (tmp_path / "master.log").read_text()[-3000:]
    data = json.loads((tmp_path / "results.json").read_text())
    offsets = data["clock_offsets"]
    assert len(offsets) == 4, offsets
    for worker, offset in offsets.items():
        expected = SKEW if worker.startswith("load2_") else 0.0
        assert abs(offset["offset_s"] - expected) <= offset["uncertainty_s"] + 0.01, (worker, offset)
        assert offset["uncertainty_s"] < 0.1, offset
    # The server's clock is the master's (neither is faked): each request's corrected send time lies just
    # before the server's stamp, whichever host sent it, so the two hosts' records interleave as it saw them.
    arrived = json.loads(fetch(h, "server", f"{server}/stats/arrived-at"))
    kept = records(tmp_path)
    assert {r["worker"].rpartition("_")[0] for r in kept} == set(LOAD_HOSTS)
    late = [(r["worker"], round(arrived[r["id"]] - r["start"], 3)) for r in kept
            if not -offsets[r["worker"]]["uncertainty_s"] - 0.01 <= arrived[r["id"]] - r["start"]
            <= NETWORK + offsets[r["worker"]]["uncertainty_s"]]
    assert not late, late[:10]
    gaps = sorted(arrived[r["id"]] - r["start"] for r in kept)
    print(f"{len(kept)} records, send to server's stamp median {gaps[len(gaps) // 2] * 1000:.1f} ms, "
          f"max {gaps[-1] * 1000:.1f} ms; offsets {offsets}")


def test_a_load_host_that_joins_late_gets_its_share_and_every_request_counts_once(hosts, tmp_path):
    h = hosts("server", "master", *LOAD_HOSTS)
    # Without --stop-timeout, Locust kills the requests in flight at a timed stop: the server saw them
    # and no result counts them.
    server, master = start(h, tmp_path, "--headless", "-u", "8", "-r", "8", "-t", "15s", "--num-requests", "100000",
                           "--stop-timeout", "2", late=5.0)
    assert master.wait(120) == 0, (tmp_path / "master.log").read_text()[-3000:]
    arrivals = json.loads(fetch(h, "server", f"{server}/stats"))["arrivals"]
    data = json.loads((tmp_path / "results.json").read_text())
    by_host: dict[str, int] = {}
    for record in records(tmp_path):
        host = record["worker"].rpartition("_")[0]
        by_host[host] = by_host.get(host, 0) + 1
    assert data["completed"] + data["failed"] == arrivals == sum(by_host.values()), (arrivals, by_host)
    assert by_host["load2"] > 0.1 * by_host["load1"], by_host  # users rebalanced onto it once it came
