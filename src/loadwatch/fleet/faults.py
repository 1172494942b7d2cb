"""`loadwatch run --fault-at TIME=ACTION:REPLICA[:DURATION]`: faults in an embedded fleet, on purpose,
at given times into the load (timed by fleet.schedule, as --scale-at's changes are), so that the
results say what the client saw, what the router did about it and how long the fleet took to serve
within its SLOs again (loadgen/faults.py).

- `kill:b`: replica b's engine (its process group: the API server and its engine core) gets SIGKILL
  and stays down, as a crashed pod does before it is replaced.
- `stop:b:20s`: SIGSTOP for 20 s, then SIGCONT: a hung replica, that accepts connections and answers
  nothing, then comes back.
- `refuse:b:20s`: b refuses with vLLM's own 503 while it stays up. vLLM 0.32 refuses a request at
  admission once `--max-num-queued-reqs` requests are unfinished (vllm/v1/engine/async_llm.py,
  check_admission); the fault fills that many slots with long streams sent straight to b (not through
  the router), holds them for the duration and hangs them up. So b truly refuses the router's
  traffic, as an overloaded replica would, and nothing is faked.

Only the replicas loadwatch started can be faulted: it owns their processes and their flags. A
refused replica needs its cap: where none is given (--replica-arg b=--max-num-queued-reqs=N or
--vllm-arg), `with_refusal_cap` gives it one of the run's user count, which a closed-loop load alone
never reaches (one request a user at a time, retries included), so b refuses only while the fault holds
its slots; the fault then holds that many.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple
from urllib.error import HTTPError
from urllib.request import Request

from loadwatch import loopback, processes
from loadwatch.defaults import Part
from loadwatch.durations import parse_duration
from loadwatch.fleet.schedule import Schedule, timed

if TYPE_CHECKING:  # options.py holds a run's faults
    from loadwatch.fleet.options import ServerOptions

FAULTS = "faults.json"  # in the run folder, beside scaling.json
KILL, STOP, REFUSE = "kill", "stop", "refuse"
LASTING = (STOP, REFUSE)  # the faults with a duration, undone at its end
CAP_FLAG = "--max-num-queued-reqs"
GONE_TIMEOUT = 10.0  # seconds a killed engine's processes get to be gone
FILL_TIMEOUT = 60.0  # seconds a refused replica's slots get to fill
HOLD_PAUSE = 0.2  # seconds between a holding stream's tries, where b refused it or did not answer


class Fault(NamedTuple):
    action: str
    replica: str
    duration: float | None  # seconds; None for kill: the replica stays down


def parse_faults(items: list[str]) -> list[tuple[float, Fault]]:
    """TIME=ACTION:REPLICA[:DURATION] items (30s=kill:b, 1m=stop:b:20s), in time order; ValueError naming
    the bad one."""
    plan = []
    for item in items:
        at, spec = timed("--fault-at", item, "TIME=ACTION:REPLICA[:DURATION]", "30s=kill:b")
        action, _, rest = spec.partition(":")
        replica, _, lasting = rest.partition(":")
        if action not in (KILL, *LASTING) or not replica:
            raise ValueError(f"--fault-at {item!r} is not TIME=ACTION:REPLICA[:DURATION] with ACTION kill, stop or "
                             "refuse (e.g. 30s=kill:b, 30s=stop:b:20s, 30s=refuse:b:20s)")
        if action == KILL and lasting:
            raise ValueError(f"--fault-at {item!r}: kill takes no duration (the replica stays down)")
        if action in LASTING and not lasting:
            raise ValueError(f"--fault-at {item!r}: {action} lasts a while: give its duration (e.g. {at:g}s="
                             f"{action}:{replica}:20s)")
        try:
            duration = parse_duration(lasting) if lasting else None
        except ValueError:
            duration = -1.0
        if duration is not None and duration <= 0:
            raise ValueError(f"--fault-at {item!r}: {lasting!r} is not a duration (e.g. 20s)")
        plan.append((at, Fault(action, replica, duration)))
    return sorted(plan)


def cap_of(options: ServerOptions, vllm_args: list[str], replica: str) -> int | None:
    """The replica's --max-num-queued-reqs, its own flag before the fleet's; None where it has none."""
    # In the replica's command line its own flags follow the fleet's, and the last one given wins.
    for flag in [*vllm_args, *options.flags_of(replica)][::-1]:
        name, _, value = flag.partition("=")
        if name == CAP_FLAG and value.isdigit():
            return int(value)
    return None


def with_refusal_cap(options: ServerOptions, vllm_args: list[str], users: int) -> ServerOptions:
    """The options with a cap for each replica a refuse fault needs one for (see the module's doc)."""
    missing = sorted({f.replica for _, f in options.faults if f.action == REFUSE
                      and cap_of(options, vllm_args, f.replica) is None})
    if not missing:
        return options
    return options.changed({"replica_arg": [*options.replica_arg,
                                            *(f"{name}={CAP_FLAG}={users}" for name in missing)]})


class Injector:
    """Makes a fleet's faults: each replica's process group and URL, and the cap a refusal fills."""

    def __init__(self, pids: dict[str, int], urls: dict[str, str], caps: dict[str, int | None], say):
        self.pids, self.urls, self.caps, self.say = pids, urls, caps, say

    def act(self, at: float, fault: Fault, stopping: threading.Event) -> dict:
        """The fault made (and, for one that lasts, undone after its duration or as the load ends):
        `effective_s` after it was asked it was in effect, `ended` when it was undone (wall clock)."""
        asked = time.time()
        event: dict = {"effective_s": None, "ended": None, "error": None}
        self.say(f"fault: {fault.action} {fault.replica}" + (f" for {fault.duration:g} s" if fault.duration else ""))
        pid = self.pids[fault.replica]
        try:
            if fault.action == KILL:
                os.killpg(pid, signal.SIGKILL)
                deadline = time.monotonic() + GONE_TIMEOUT
                while processes.alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                event["effective_s"] = round(time.time() - asked, 3)
            elif fault.action == STOP:
                os.killpg(pid, signal.SIGSTOP)
                event["effective_s"] = round(time.time() - asked, 3)
                try:
                    stopping.wait(fault.duration)
                finally:  # a hung replica is never left hung: the stack could not stop it
                    os.killpg(pid, signal.SIGCONT)
                    event["ended"] = time.time()
            else:
                event |= self._refuse(fault, asked, stopping)
        except OSError as exc:  # ProcessLookupError: it was gone already
            event["error"] = f"{fault.replica}'s engine: {exc.strerror or exc}"
        if event["error"]:
            self.say(f"warning: --fault-at {at:g}s={fault.action}:{fault.replica}: {event['error']}")
        return event

    def _refuse(self, fault: Fault, asked: float, stopping: threading.Event) -> dict:
        cap = self.caps[fault.replica]
        assert cap is not None and fault.duration is not None  # with_refusal_cap gave it one; parse_faults a duration
        model, longest = _served(self.urls[fault.replica])
        holding = _Holding(self.urls[fault.replica], model, longest, cap)
        holding.start()
        out: dict = {"held": cap}
        try:
            if holding.full.wait(min(FILL_TIMEOUT, fault.duration)):
                out["effective_s"] = round(time.time() - asked, 3)
                stopping.wait(max(0.0, asked + fault.duration - time.time()))
            else:
                out |= {"held": holding.admitted,
                        "error": f"{fault.replica} took {holding.admitted} of {cap} holding streams in time: "
                                 "it did not refuse"}
        finally:
            holding.hang_up()
            out["ended"] = time.time()
        return out


def _served(url: str) -> tuple[str, int]:
    """The model a replica serves and its context length, from its /v1/models (vLLM's max_model_len)."""
    where = url.rstrip("/") + "/v1/models"
    with loopback.urlopen(where, timeout=10) as response:
        try:
            card = json.loads(response.read())["data"][0]
            return str(card["id"]), int(card.get("max_model_len") or 4096)
        except (ValueError, KeyError, IndexError, TypeError):
            raise OSError(f"{where} listed no model") from None


class _Holding:
    """`count` streams held open on one replica, each sent again when it ends, until hung up: the
    replica's unfinished requests stay at its cap, and it refuses every other request with 503."""

    PROMPT_ROOM = 64  # tokens of the context left to the short prompt and its chat template

    def __init__(self, url: str, model: str, longest: int, count: int):
        self.url, self.count = url.rstrip("/") + "/v1/chat/completions", count
        self.body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Hold."}], "stream": True,
                                "max_tokens": max(1, longest - self.PROMPT_ROOM), "ignore_eos": True}).encode()
        self.admitted = 0  # streams that were admitted once at least
        self.full = threading.Event()  # every stream admitted, or the replica refused one: its slots are full
        self._lock = threading.Lock()
        self._hang_up = threading.Event()
        self._threads = [threading.Thread(target=self._hold, name=f"refuse-{i}", daemon=True) for i in range(count)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def hang_up(self) -> None:
        self._hang_up.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _hold(self) -> None:
        first = True
        while not self._hang_up.is_set():
            request = Request(self.url, data=self.body, headers={"Content-Type": "application/json"})
            try:
                with loopback.urlopen(request, timeout=30) as response:
                    if first:
                        first = False
                        self._admitted()
                    for _line in response:  # closed, the stream's end aborts its request in vLLM
                        if self._hang_up.is_set():
                            return
            except HTTPError as exc:
                if exc.code == 503:  # full already: what the fault is for
                    self.full.set()
                self._hang_up.wait(HOLD_PAUSE)
            except OSError:
                self._hang_up.wait(HOLD_PAUSE)

    def _admitted(self) -> None:
        with self._lock:
            self.admitted += 1
            if self.admitted >= self.count:
                self.full.set()


def killed_replicas(run_dir: Path) -> set[str]:
    """The stack's names of the replicas a fault of the run killed (faults.json): theirs is no death to
    report when the stack stops."""
    path = run_dir / FAULTS
    events = json.loads(path.read_text())["events"] if path.is_file() else []
    return {Part.replica(e["replica"]) for e in events if e.get("action") == KILL and not e.get("error")}


def fault_schedule(plan: list[tuple[float, Fault]], injector: Injector, run_dir: Path) -> Schedule[Fault]:
    return Schedule(plan, injector.act, run_dir, FAULTS,
                    lambda fault: {"action": fault.action, "replica": fault.replica, "duration_s": fault.duration})
