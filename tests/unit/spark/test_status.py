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
