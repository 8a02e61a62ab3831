"""A Spark build's status, from its driver to statectl while the build runs. The driver (statectl.spark.job)
writes a line after STATUS_MARK to its stderr, which spark-submit's log holds, every STATUS_EVERY_S while a
figure changed and once at the end (:class:`StatusLines`): the Spark stages done of the stages of the jobs
so far (SparkContext.statusTracker()) and the rows the finished tasks wrote (an accumulator they add to).
The launcher (statectl.spark.launch) reads the log's new lines as it waits for spark-submit
(:class:`StatusReader`).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any, Callable

STATUS_MARK = "STATECTL-BUILD-STATUS: "
# The job's manifest is written and nothing it does after counts (its SparkContext's stop and the JVM's exit,
# about 1.3 s): the launcher may go on while they finish (statectl.spark.launch).
DONE_MARK = "STATECTL-BUILD-DONE"
STATUS_EVERY_S = 0.5
# A rescale's driver started before its job file is up and waits for it (statectl.spark.job.rescale_when_written).
WAITING_MARK = "STATECTL-BUILD-WAITING"


class StatusLines:
    """In the driver, for the ``with`` block that runs the build's Spark jobs: status lines on stderr from a
    thread of its own, and the last figures when the block ends."""

    def __init__(self, sc: Any, written: Any, every_s: float = STATUS_EVERY_S):
        self.sc, self.written, self.every_s = sc, written, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="statectl-build-status", daemon=True)
        self._last: dict[str, int] | None = None

    def __enter__(self) -> "StatusLines":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if exc[0] is None:
            self.write()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.write()
            except Exception:  # noqa: BLE001 - a status that cannot be read never fails the build
                return

    def figures(self) -> dict[str, int]:
        """Stages done (those of a job that succeeded, skipped ones too, or with every task completed) of the
        distinct stages of the jobs so far; rows the finished tasks wrote."""
        tracker = self.sc.statusTracker()
        stages: dict[int, bool] = {}
        for job_id in tracker.getJobIdsForGroup():
            info = tracker.getJobInfo(job_id)
            if info is None:
                continue
            for stage_id in info.stageIds:
                stages[stage_id] = stages.get(stage_id, False) or info.status == "SUCCEEDED" \
                    or _stage_done(tracker.getStageInfo(stage_id))
        return {"stages": sum(stages.values()), "stages_total": len(stages), "rows": int(self.written.value)}

    def write(self) -> None:
        figures = self.figures()
        if figures != self._last and figures["stages_total"]:  # nothing to say before the first job
            print(STATUS_MARK + json.dumps(figures), file=sys.stderr, flush=True)
            self._last = figures


def _stage_done(info: Any) -> bool:
    return info is not None and info.numTasks > 0 and info.numCompletedTasks >= info.numTasks


class StatusReader:
    """In the launcher: the status lines the job wrote to ``log_path`` since the last :meth:`poll`."""

    def __init__(self, log_path: Path, on_status: Callable[[dict[str, int]], None] | None):
        self.log_path, self.on_status = log_path, on_status
        self._offset = 0
        self._partial = b""
        self.done = False  # the job said DONE_MARK

    def poll(self) -> None:
        """Hand ``on_status`` the newest status line written since the last poll (none: not called); note
        DONE_MARK."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # a line not yet ended is read whole next time
        newest = None
        for line in lines:
            text = line.decode(errors="replace")
            self.done = self.done or text.startswith(DONE_MARK)
            if STATUS_MARK in text:
                try:
                    newest = json.loads(text[text.index(STATUS_MARK) + len(STATUS_MARK):])
                except ValueError:
                    continue
        if isinstance(newest, dict) and self.on_status is not None:
            self.on_status(newest)
