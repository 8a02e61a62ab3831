"""Read leniently, write strictly: an index statectl writes is one Samza's constructors accept.

Samza's index classes check their arguments (Preconditions in SnapshotIndex, SnapshotMetadata, DirIndex,
FileIndex, FileBlob, FileMetadata); Jackson calls those constructors when it reads an index, so an index
that breaks one of the checks cannot be loaded by a Samza job. statectl reads some of it leniently (a file's
owner may be missing); it must never write that back.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from statectl.errors import IndexFormatError, StatectlError
from statectl.snapshot.diff import UNKNOWN_NAME, LocalFile, diff_local, writable_removed
from statectl.snapshot.model import (DirIndex, FileBlob, FileIndex, FileMetadata, SnapshotIndex, SnapshotMetadata,
                                     parse_index, samza_problems, serialize_index)
from tests.unit.snapshot.test_diff import build_tree, index_tree, local_metadata

META = FileMetadata(1, 2, 3, "samza", "hadoop", "rw-r--r--")


def fi(name: str, blob: str | None = None, meta: FileMetadata = META) -> FileIndex:
    return FileIndex(name, (FileBlob(blob or f"blobs/{name}", 0),), meta, 7)


def index(root: DirIndex, **meta) -> SnapshotIndex:
    fields = {"checkpoint_id": "1718035261042-382917", "job_name": "j", "job_id": "1", "task_name": "Partition 0",
              "store_name": "s", **meta}
    return SnapshotIndex(1718035261187, SnapshotMetadata(**fields), root, None)


def root(*files: FileIndex, removed=(), dirs=(), removed_dirs=()) -> DirIndex:
    return DirIndex("", tuple(files), tuple(removed), tuple(dirs), tuple(removed_dirs))


def refused(i: SnapshotIndex) -> str:
    with pytest.raises(IndexFormatError) as exc:
        serialize_index(i)
    assert exc.value.hint and "Samza would refuse to read this index" in exc.value.hint
    return str(exc.value)


# ---- the serializer ------------------------------------------------------------------------------

def test_a_lenient_read_is_not_written_back():
    doc = json.loads(serialize_index(index(root(fi("CURRENT"), dirs=[DirIndex("sub", (fi("f"),))]))))
    meta = doc["dir-index"]["sub-dirs-present"][0]["files-present"][0]["file-metadata"]
    del meta["owner"], meta["group"], meta["creation-time-millis"]
    lenient = parse_index(json.dumps(doc))  # read: the owner is "" and the time 0, as Samza reads a time
    assert lenient.dir_index.sub_dirs_present[0].files_present[0].file_metadata == FileMetadata(0, 2, 3, "", "",
                                                                                               "rw-r--r--")
    assert refused(lenient) == "cannot write index: file 'sub/f' has no owner"
    assert list(samza_problems(lenient)) == ["file 'sub/f' has no owner", "file 'sub/f' has no group"]


@pytest.mark.parametrize("i, message", [
    (index(root(), job_name=""), "snapshot-metadata.job-name is blank"),
    (index(root(), job_id=" "), "snapshot-metadata.job-id is blank"),
    (index(root(), task_name="\t\n"), "snapshot-metadata.task-name is blank"),
    (index(root(), store_name="\u3000"), "snapshot-metadata.store-name is blank"),
    (index(root(), checkpoint_id="latest"),
     "snapshot-metadata.checkpoint-id 'latest' is not a checkpoint id Samza can read"),
    (index(root(), checkpoint_id="5"),  # read leniently from a JSON number
     "snapshot-metadata.checkpoint-id '5' is not a checkpoint id Samza can read"),
    (replace(index(root()), creation_time_millis=-1), "creation-time-millis -1 is out of range"),
    (replace(index(root()), prev_snapshot_index_blob_id=" "), "prev-snapshot-index-blob-id is blank"),
    (index(root(fi(" "))), "file ' ' has a blank name"),
    (index(root(fi("a", blob=" "))), "file 'a' has a blob with a blank id"),
    (index(root(removed=[fi("a", meta=replace(META, creation_time_millis=-5))])),
     "file 'a (removed)' has creation-time-millis -5, out of range"),
    (index(root(dirs=[DirIndex("d", (), (fi("x", meta=replace(META, last_modified_time_millis=-1)),))])),
     "file 'd/x (removed)' has last-modified-time-millis -1, out of range"),
    (index(root(removed_dirs=[DirIndex("gone", (fi("y", meta=replace(META, group="")),))])),
     "file 'gone (removed)/y' has no group"),
    (index(root(fi("a", meta=replace(META, permissions="")))), "file 'a' has no permissions"),
    (index(root(fi("a", meta=replace(META, size=2 ** 63)))), "file 'a' has size 9223372036854775808, out of range"),
])
def test_what_samzas_constructors_refuse_is_not_written(i, message):
    assert refused(i) == f"cannot write index: {message}"


@pytest.mark.parametrize("i", [
    index(root(fi("\u00a0")), job_name="\u2007", task_name="\u202f"),  # non-breaking spaces are not blank
    index(root(fi("a")), checkpoint_id="+1-2-3"),  # CheckpointId.deserialize reads it
    index(root(fi("a", meta=replace(META, creation_time_millis=0, last_modified_time_millis=0, size=0)))),
    index(DirIndex("", (), (), (), (DirIndex(" ", (fi("x"),)),))),  # a dir name may be blank
])
def test_what_samza_accepts_is_written(i):
    assert list(samza_problems(i)) == []
    assert parse_index(serialize_index(i)) == i


# DirIndex.validatePresentAndRemovedOverlap, with its exact reach.

def test_the_same_file_present_and_removed_in_one_dir_is_refused():
    empty = FileIndex("LOG", (), META, 0)
    assert refused(index(root(empty, removed=[empty]))) == \
        "cannot write index: the root dir lists the same file as present and removed"
    # The same name with other content (a changed file) is what every backup writes.
    assert not list(samza_problems(index(root(fi("LOG"), removed=[fi("LOG", blob="blobs/old")]))))


def test_a_blob_present_and_removed_is_refused():
    assert refused(index(root(fi("a", blob="blobs/1"), removed=[fi("b", blob="blobs/1")]))) == \
        "cannot write index: the root dir has blob 'blobs/1' both present and removed"
    # Present in a present sub-dir, removed in a removed sub-dir's present sub-dir: still the root's business.
    i = index(root(dirs=[DirIndex("p", (fi("a", blob="blobs/1"),))],
                   removed_dirs=[DirIndex("r", (), (), (DirIndex("rr", (fi("b", blob="blobs/1"),)),))]))
    assert refused(i) == "cannot write index: the root dir has blob 'blobs/1' both present and removed"


def test_overlaps_samza_does_not_see_are_not_refused_either():
    """Samza leaves out a present sub-dir's removed files, and a removed sub-dir's removed sub-dirs, when it
    compares a dir's present and removed blobs (each sub-dir checks its own). Refusing more than Samza does
    could stop backups over an index Samza wrote."""
    i = index(root(fi("a", blob="blobs/1"), dirs=[DirIndex("p", (), (fi("b", blob="blobs/1"),))]))
    assert list(samza_problems(i)) == []
    i = index(root(fi("a", blob="blobs/1"),
                   removed_dirs=[DirIndex("r", (), (), (), (DirIndex("rr", (fi("b", blob="blobs/1"),)),))]))
    assert list(samza_problems(i)) == []


def test_a_blob_at_another_offset_is_another_blob():
    assert not list(samza_problems(index(root(fi("a", blob="blobs/1"),
                                              removed=[replace(fi("b", blob="blobs/1"),
                                                               blobs=(FileBlob("blobs/1", 5),))]))))


# ---- the reader ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [" ", "\t", "\u3000", "\u2028 "])
def test_a_blank_file_name_is_a_malformed_index(name):
    doc = json.loads(serialize_index(index(root(fi("a")))))
    doc["dir-index"]["files-present"][0]["file-name"] = name
    with pytest.raises(IndexFormatError) as exc:
        parse_index(json.dumps(doc))
    assert str(exc.value) == f"malformed index: blank file name {name!r} at dir-index.files-present[0]"


# ---- what a backup builds from a previous index --------------------------------------------------

def new_dir_index(diff) -> DirIndex:
    """The next snapshot's DirIndex, built as engine/backup.py builds it."""
    files = [FileIndex(f.name, (FileBlob(f"blobs/new/{f.path}", 0),), f.metadata, f.crc) for f in diff.files_added]
    files += diff.files_retained
    return DirIndex(diff.dir_name, tuple(sorted(files, key=lambda f: f.file_name)), tuple(diff.files_removed),
                    tuple(new_dir_index(d) for d in diff.sub_dirs_added + diff.sub_dirs_retained),
                    tuple(diff.sub_dirs_removed))


def test_a_backup_over_a_leniently_read_index_writes_an_index_samza_reads(tmp_path):
    build_tree(tmp_path / "prev", {"CURRENT": b"c", "kept": b"k", "changed": b"old", "gone": b"g",
                                   "sub": {"x": b"x"}, "gone-dir": {"y": b"y", "deeper": {"z": b"z"}}})
    build_tree(tmp_path / "local", {"CURRENT": b"c", "kept": b"k", "changed": b"new", "sub": {"x": b"x"}})
    doc = json.loads(serialize_index(index(index_tree(tmp_path / "prev"))))

    def strip(d):  # an index as some other writer left it: no owner, group or times anywhere
        for f in d["files-present"] + d["files-removed"]:
            for key in ("owner", "group", "creation-time-millis", "last-modified-time-millis"):
                del f["file-metadata"][key]
        for s in d["sub-dirs-present"] + d["sub-dirs-removed"]:
            strip(s)

    strip(doc["dir-index"])
    lenient = parse_index(json.dumps(doc))
    assert list(samza_problems(lenient))

    diff = diff_local(tmp_path / "local", lenient.dir_index)
    # Files whose entry lacks the owner are not the same file (Samza compares owner names): uploaded again.
    assert sorted(p for p, _ in diff.added()) == ["CURRENT", "changed", "kept", "sub/x"]
    new = replace(index(new_dir_index(diff)), prev_snapshot_index_blob_id="blobs/prev")
    assert list(samza_problems(new)) == []
    back = parse_index(serialize_index(new))
    for path, f in back.dir_index.walk_present():
        assert f.file_metadata == local_metadata(tmp_path / "local" / path)
    removed = {f.file_name: f.file_metadata for f in back.dir_index.removed_files()}
    assert sorted(removed) == ["CURRENT", "changed", "gone", "kept", "x", "y", "z"]
    assert {(m.owner, m.group) for m in removed.values()} == {(UNKNOWN_NAME, UNKNOWN_NAME)}
    # Nothing but the missing fields changed: the blobs to delete are the previous snapshot's.
    assert sorted(back.removed_blob_ids()) == sorted(lenient.present_blob_ids())


def test_retained_entries_take_the_local_metadata(tmp_path):
    """Samza keeps a retained file's previous entry as it is; statectl records the file as it is now (the
    same bytes, owner, and owner bits, by the same-file rule), so a lenient read never carries over."""
    build_tree(tmp_path / "d", {"CURRENT": (b"c", 0o600)})
    prev = index_tree(tmp_path / "d")
    old = prev.files_present[0]
    prev = replace(prev, files_present=(replace(old, file_metadata=replace(
        old.file_metadata, creation_time_millis=0, last_modified_time_millis=0, permissions="rw-rw-rw-")),))
    os.chmod(tmp_path / "d" / "CURRENT", 0o640)
    diff = diff_local(tmp_path / "d", prev)
    [(_, kept)] = diff.retained()
    assert (kept.file_name, kept.blobs, kept.checksum) == (old.file_name, old.blobs, old.checksum)
    assert kept.file_metadata == local_metadata(tmp_path / "d" / "CURRENT")
    assert kept.file_metadata.permissions == "rw-r-----"


def test_an_entry_that_needs_nothing_is_kept_as_it_is():
    f = fi("a")
    assert writable_removed(f) is f
    bare = replace(f, file_metadata=replace(META, owner="", group=" ", creation_time_millis=-1))
    assert writable_removed(bare).file_metadata == replace(META, owner=UNKNOWN_NAME, group=UNKNOWN_NAME,
                                                           creation_time_millis=0)


def test_local_metadata_has_no_negative_times(tmp_path):
    path = tmp_path / "old"
    path.write_bytes(b"x")
    os.utime(path, ns=(-86_400_000_000_000, -86_400_000_000_000))  # 1969-12-31
    lf = LocalFile.from_stat(path, path.stat())
    assert lf.mtime_ms < 0
    assert lf.metadata.last_modified_time_millis == 0


def test_a_file_with_a_blank_name_cannot_be_backed_up(tmp_path):
    build_tree(tmp_path / "d", {"CURRENT": b"c", " ": {"inner": b"i"}})  # a dir may be named so
    assert sorted(p for p, _ in diff_local(tmp_path / "d", None).added()) == [" /inner", "CURRENT"]
    (tmp_path / "d" / "\t").write_bytes(b"")
    with pytest.raises(StatectlError) as exc:
        diff_local(tmp_path / "d", None)
    assert str(exc.value) == (f"cannot back up {tmp_path / 'd' / chr(9)}: a Samza index cannot record a file "
                              "whose name is only whitespace")


def test_the_samza_fixture_is_writable():
    data = (Path(__file__).resolve().parents[2] / "data" / "samza-index.json").read_bytes()
    i = parse_index(data)
    assert list(samza_problems(i)) == []
    assert parse_index(serialize_index(copy.deepcopy(i))) == i
