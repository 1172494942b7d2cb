"""What the master or local runner writes while a run goes on: each request's record as it
arrives, and a checkpoint of the results every --checkpoint-interval seconds, so that a killed
master loses a few seconds, not the run."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import BinaryIO

import gevent
import orjson

from loadwatch.loadgen import results
from loadwatch.loadgen.process import Process

log = logging.getLogger(__name__)
FLUSH_SECONDS = 1.0


class Keeper:
    def __init__(self, process: Process) -> None:
        self.process = process
        self.file: BinaryIO | None = None
        self.path: Path | None = None
        self.written = 0
        self.loop: gevent.Greenlet | None = None

    def start(self) -> None:
        """A run starts: a fresh records file, and the loop that fills it and checkpoints."""
        self.stop()
        self.path = self.process.settings.requests_path
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.file = open(self.path, "wb")  # noqa: SIM115  (open for the whole run)
            except OSError as exc:
                log.error("Cannot write per-request records to %s: %s; the run goes on without them", self.path,
                          exc.strerror)
                self.process.recorder.keep_records = False
        self.written = 0
        self.loop = gevent.spawn(self._run)

    def _run(self) -> None:
        next_checkpoint = time.monotonic() + self.process.settings.checkpoint_interval
        while True:
            gevent.sleep(FLUSH_SECONDS)
            self.flush()
            if time.monotonic() >= next_checkpoint:
                results.checkpoint(self.process)
                next_checkpoint = time.monotonic() + self.process.settings.checkpoint_interval

    def flush(self) -> None:
        records = self.process.recorder.take_records()
        if self.file is None or not records:
            return
        try:
            self.file.write(b"".join(_line(r) for r in records))
            self.file.flush()
            self.written += len(records)
        except OSError as exc:
            log.error("Cannot write per-request records to %s: %s; no more are written", self.path, exc.strerror)
            self.file = None
            self.process.recorder.keep_records = False

    def stop(self) -> None:
        """The run is over: its last records written, the file closed, the loop ended."""
        if self.loop is not None:
            self.loop.kill(block=False)
            self.loop = None
        self.flush()
        if self.file is not None:
            self.file.close()
            self.file = None
            log.info("%d per-request records written to %s", self.written, self.path)


def _line(record: dict) -> bytes:
    # orjson: the standard library's encoder was a tenth of a request's CPU at a thousand streams a
    # core; it writes the same compact JSON, and null where that wrote a non-standard NaN.
    return orjson.dumps(record) + b"\n"
