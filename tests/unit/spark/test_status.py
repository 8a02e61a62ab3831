"""The build's status lines as the launcher reads them from spark-submit's log (statectl.spark.status): the
newest line since the last read, a line not yet ended left for the next read, other output ignored."""

from __future__ import annotations

from pathlib import Path

from statectl.spark.status import STATUS_MARK, StatusReader


def test_the_reader_hands_over_the_newest_status_line_once(tmp_path: Path):
    log = tmp_path / "spark-submit.log"
    got: list[dict] = []
    reader = StatusReader(log, got.append)
    reader.poll()  # no log yet
    log.write_text("$ spark-submit ...\n" + STATUS_MARK + '{"stages": 0, "stages_total": 2, "rows": 0}\n'
                   + "26/11/27 WARN something\n" + STATUS_MARK + '{"stages": 1, "stages_total": 2, "rows": 10}\n'
                   + STATUS_MARK + '{"stages": 2, "stag')
    reader.poll()
    assert got == [{"stages": 1, "stages_total": 2, "rows": 10}]
    reader.poll()  # nothing new
    assert len(got) == 1
    with open(log, "a") as f:
        f.write('es_total": 2, "rows": 30}\n' + STATUS_MARK + "{not json\n")
    reader.poll()
    assert got[-1] == {"stages": 2, "stages_total": 2, "rows": 30} and len(got) == 2


def test_the_launcher_goes_on_once_the_job_says_it_is_done_and_reaps_it_later(tmp_path: Path):
    """A job that says DONE_MARK (its manifest written) and then takes its time to exit (its SparkContext's
    stop, the JVM's exit): the launcher returns 0 while it still runs, when allowed to; otherwise it waits
    for its own exit code."""
    import subprocess

    from statectl.spark.launch import _wait
    from statectl.spark.status import DONE_MARK

    log = tmp_path / "spark-submit.log"
    script = f"echo '{STATUS_MARK}{{\"stages\": 1, \"stages_total\": 1, \"rows\": 5}}'; echo {DONE_MARK}; "
    with open(log, "wb") as out:
        slow = subprocess.Popen(["sh", "-c", script + "exec sleep 600"], stdout=out)
        try:
            got: list[dict] = []
            assert _wait(slow, None, StatusReader(log, got.append), early=True) == 0
            assert slow.poll() is None and got == [{"stages": 1, "stages_total": 1, "rows": 5}]
        finally:
            slow.kill()
            slow.wait()
        failing = subprocess.Popen(["sh", "-c", script + "exit 3"], stdout=out)
        assert _wait(failing, None, StatusReader(log, None), early=False) == 3
