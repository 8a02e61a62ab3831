"""Text tables have a header row: standby status (its rows from real status files in
tests/integration/test_standby_layout.py and test_standby.py), and the helper that aligns them."""

from __future__ import annotations

from statectl.cli.common import table
from statectl.cli.standby.status import status_text
from statectl.engine.standby.status import ReplicaStatus


def test_table_aligns_columns_under_the_header():
    assert table(["A", "BB", "C"], [["xxx", "y", "z"], ["", "", ""]]) == ["A    BB  C", "xxx  y   z", ""]


def test_standby_status_has_a_header_row_and_the_move_command_under_its_replica():
    rows = [ReplicaStatus("/s.statectl-standby/0/counts/Partition_0", "cl", 0, 4267, 3, 1.25, 123, True, True, None,
                          container="0"),
            ReplicaStatus("/s/counts/Standby-Partition_1-0", "cl", 1, None, None, None, None, False, False, None,
                          layout="old", move_command="statectl standby follow --job j")]
    lines = status_text(rows).splitlines()
    assert lines[0].split() == ["REPLICA", "OFFSET", "LAG", "RECORDS", "LAG", "SECONDS", "FOLLOWER", "PROMOTABLE",
                                "LAYOUT", "CONTAINER"]
    assert lines[1].split() == ["/s.statectl-standby/0/counts/Partition_0", "4267", "3", "1.2", "pid", "123", "yes",
                                "standby-root", "0"]
    assert lines[2].split() == ["/s/counts/Standby-Partition_1-0", "-", "-", "-", "-", "no", "old", "-"]
    assert lines[3] == ("  old layout: in the state dir, where Samza deletes it; move it: "
                        "statectl standby follow --job j")
    assert lines[0].index("OFFSET") == lines[1].index("4267") == lines[2].index("  -") + 2
    assert status_text([]) == "no replicas"
