"""The owner and group names an index records: --file-owner's USER:GROUP, the sources' owner (rescale's
default), and an index with every file given to one owner."""

from __future__ import annotations

import pytest

from statectl.errors import UsageError
from statectl.snapshot.model import DirIndex, FileIndex, FileMetadata, files_owner, parse_file_owner


def _file(name: str, owner: str, group: str) -> FileIndex:
    return FileIndex(name, (), FileMetadata(0, 0, 0, owner, group, "rw-r--r--"), 0)


@pytest.mark.parametrize("text, want", [("samza:hadoop", ("samza", "hadoop")), ("1001:1001", ("1001", "1001")),
                                        ("svc.job-1:grp_2", ("svc.job-1", "grp_2"))])
def test_parse_file_owner(text, want):
    assert parse_file_owner(text) == want


@pytest.mark.parametrize("text", ["samza", "samza:", ":hadoop", "a:b:c", " samza:hadoop", "sam za:hadoop ", ""])
def test_parse_file_owner_refuses_what_is_not_user_colon_group(text):
    with pytest.raises(UsageError, match="expected USER:GROUP"):
        parse_file_owner(text)


def test_files_owner_prefers_the_sst_files_owner():
    """A backup an older statectl ran as root recorded root for CURRENT, MANIFEST, OPTIONS and the log."""
    old = DirIndex("", (_file("000009.sst", "samza", "hadoop"), _file("CURRENT", "root", "root"),
                        _file("MANIFEST-000013", "root", "root"), _file("OPTIONS-000015", "root", "root")))
    assert files_owner([old]) == ("samza", "hadoop")
    no_ssts = DirIndex("", (_file("CURRENT", "root", "root"), _file("MANIFEST-1", "samza", "hadoop"),
                            _file("OPTIONS-1", "samza", "hadoop")))
    assert files_owner([no_ssts]) == ("samza", "hadoop")
    assert files_owner([DirIndex("")]) is None


def test_with_owner_gives_every_present_file_and_keeps_removed_entries():
    removed = _file("000001.sst", "root", "root")
    d = DirIndex("", (_file("CURRENT", "root", "root"),), (removed,),
                 (DirIndex("sub", (_file("x", "a", "b"),)),))
    got = d.with_owner("samza", "hadoop")
    assert {(f.file_metadata.owner, f.file_metadata.group) for _, f in got.walk_present()} == {("samza", "hadoop")}
    assert got.files_removed == (removed,)
    assert [rel for rel, _ in got.walk_present()] == [rel for rel, _ in d.walk_present()]
