"""The rescale driver started before its job file (statectl.spark.job._when_written) and the kill of a job's
process group (statectl.spark.launch._group_runs), without Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from statectl.fsutil import write_atomic
from statectl.spark.context import BuildError
from statectl.spark.job import _when_written
from statectl.spark.launch import _group_runs
from tests.tools.standby_helpers import process_state

pytestmark = pytest.mark.timeout(60)


def test_the_driver_takes_the_job_file_once_it_is_written(tmp_path: Path):
    job = tmp_path / "BUILD-JOB.json"
    writer = threading.Timer(0.2, lambda: write_atomic(job, json.dumps({"spec": {"source": "snapshots"}})))
    writer.start()
    try:
        assert _when_written(job, os.getpid()) == {"spec": {"source": "snapshots"}}
    finally:
        writer.cancel()


def test_the_driver_stops_waiting_when_its_statectl_is_gone(tmp_path: Path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(BuildError, match="statectl ended before it wrote the job file"):
        _when_written(tmp_path / "BUILD-JOB.json", gone.pid)


def test_a_group_of_zombies_does_not_run(tmp_path: Path):
    """A killed job's processes whose parent died first are zombies until init reaps them: the group is gone."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        assert _group_runs(proc.pid)
        proc.kill()
        while process_state(proc.pid) != "Z":
            time.sleep(0.01)  # dead, not reaped: still in its group
        assert not _group_runs(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_a_done_job_tears_down_at_the_lowest_priority(tmp_path: Path):
    """Once the job says it is done, the wait returns and every process of its group (the JVM, the Python
    workers) runs at nice 19: its teardown takes the CPU the caller's next steps leave."""
    from statectl.spark.launch import _kill, _wait
    from statectl.spark.status import DONE_MARK, StatusReader

    log = tmp_path / "job.log"
    code = ("import subprocess, sys, time; w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
            f"print({DONE_MARK!r}, flush=True); time.sleep(60)")
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, start_new_session=True)
    try:
        assert _nice(proc.pid) < 19
        assert _wait(proc, 30, StatusReader(log, None), early=True) == 0
        members = [int(p) for p in os.listdir("/proc") if p.isdigit() and _group_of(int(p)) == proc.pid]
        assert len(members) == 2 and all(_nice(p) == 19 for p in members)
    finally:
        _kill(proc)


def _group_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None
