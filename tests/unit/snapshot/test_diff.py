"""DirDiff: a local dir against a snapshot's DirIndex, and an index against an index."""

from __future__ import annotations

import grp
import os
import pwd
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

import pytest

from statectl.snapshot.diff import DirDiff, LocalFile, diff_indexes, diff_local
from statectl.snapshot.model import DirIndex, FileBlob, FileIndex, FileMetadata, mode_to_permissions

MIB = 1024 * 1024
# A tree spec: name -> bytes (a file, mode 0o644), (bytes, mode), or a dict (a sub-dir).
Tree = dict


def build_tree(root: Path, spec: Tree) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, value in spec.items():
        path = root / name
        if isinstance(value, dict):
            build_tree(path, value)
            continue
        data, mode = value if isinstance(value, tuple) else (value, 0o644)
        path.write_bytes(data)
        os.chmod(path, mode)


def index_tree(root: Path, name: str = "") -> DirIndex:
    """The DirIndex a backup of ``root`` would record, computed independently of statectl's diff code.

    Owner and group names are the local ones, as a backup on this host records them.
    """
    files, dirs = [], []
    for entry in sorted(root.iterdir()):
        if entry.is_dir():
            dirs.append(index_tree(entry, entry.name))
            continue
        st = entry.stat()
        meta = FileMetadata(st.st_ctime_ns // 1_000_000, st.st_mtime_ns // 1_000_000, st.st_size,
                            pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name,
                            mode_to_permissions(st.st_mode))
        # One blob id per file (its path), as a backup gives: a blob is never in two places of an index.
        blobs = (FileBlob(f"blob-{entry}", 0),) if st.st_size else ()
        files.append(FileIndex(entry.name, blobs, meta, zlib.crc32(entry.read_bytes())))
    return DirIndex(name, tuple(files), (), tuple(dirs), ())


def local_metadata(path: Path) -> FileMetadata:
    """The FileMetadata of a local file, computed independently of statectl's code."""
    st = path.stat()
    return FileMetadata(st.st_ctime_ns // 1_000_000, st.st_mtime_ns // 1_000_000, st.st_size,
                        pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name,
                        mode_to_permissions(st.st_mode))


def _map_files(d: DirIndex, fn: Callable[[FileIndex], FileIndex]) -> DirIndex:
    return replace(d, files_present=tuple(fn(f) for f in d.files_present),
                   sub_dirs_present=tuple(_map_files(s, fn) for s in d.sub_dirs_present))


def _other_time(f: FileIndex) -> FileIndex:
    """The same file as recorded at another time: timestamps differ, which the same-file rule ignores."""
    return replace(f, file_metadata=replace(f.file_metadata, creation_time_millis=1, last_modified_time_millis=2))


def _other_owner(f: FileIndex) -> FileIndex:
    """The same bytes recorded with other owner and group names: Samza's areSameFile compares them."""
    return replace(f, file_metadata=replace(f.file_metadata, owner="nobody", group="nogroup"))


def retained_dirs(diff: DirDiff) -> list[str]:
    return sorted(prefix + s.dir_name for prefix, d in diff.walk() for s in d.sub_dirs_retained)


@dataclass
class Case:
    id: str
    local: Tree
    prev: Optional[Tree]  # None: there is no previous snapshot
    added: list[str] = field(default_factory=list)
    retained: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    added_dirs: list[str] = field(default_factory=list)
    retained_dirs: list[str] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    ignore: object = frozenset()
    tweak: Optional[Callable[[DirIndex], DirIndex]] = None  # edits the previous index by hand


BIG = MIB + 1
CURRENT = b"MANIFEST-000014\n"

LOCAL_CASES = [
    Case("no-previous-index",
         local={"CURRENT": CURRENT, "000001.sst": b"s" * 100, "sub": {"a": b"a", "deeper": {"b": b"b"}},
                "empty-dir": {}},
         prev=None,
         added=["000001.sst", "CURRENT", "sub/a", "sub/deeper/b"],
         added_dirs=["empty-dir", "sub", "sub/deeper"]),
    Case("identical",
         local={"CURRENT": CURRENT, "000001.sst": b"s" * 100, "sub": {"a": b"a", "deeper": {"b": b"b"}},
                "empty-dir": {}},
         prev={"CURRENT": CURRENT, "000001.sst": b"s" * 100, "sub": {"a": b"a", "deeper": {"b": b"b"}},
               "empty-dir": {}},
         retained=["000001.sst", "CURRENT", "sub/a", "sub/deeper/b"],
         retained_dirs=["empty-dir", "sub", "sub/deeper"]),
    Case("timestamps-differ",
         local={"CURRENT": CURRENT, "sub": {"a": b"a"}},
         prev={"CURRENT": CURRENT, "sub": {"a": b"a"}},
         tweak=lambda d: _map_files(d, _other_time),
         retained=["CURRENT", "sub/a"], retained_dirs=["sub"]),
    Case("owner-and-group-names-differ",
         local={"CURRENT": CURRENT, "sub": {"a": b"a"}, "000001.sst": b"s" * BIG},
         prev={"CURRENT": CURRENT, "sub": {"a": b"a"}, "000001.sst": b"s" * BIG},
         tweak=lambda d: _map_files(d, _other_owner),
         added=["000001.sst", "CURRENT", "sub/a"], removed=["000001.sst", "CURRENT", "sub/a"], retained_dirs=["sub"]),
    Case("owner-name-differs",  # DirDiffUtil.areSameFile(.., compareFileOwners=true), as Samza's backup calls it
         local={"CURRENT": CURRENT, "000001.sst": b"s" * BIG},
         prev={"CURRENT": CURRENT, "000001.sst": b"s" * BIG},
         tweak=lambda d: _map_files(d, lambda f: replace(f, file_metadata=replace(f.file_metadata, owner="nobody"))),
         added=["000001.sst", "CURRENT"], removed=["000001.sst", "CURRENT"]),
    Case("group-name-differs",
         local={"CURRENT": CURRENT},
         prev={"CURRENT": CURRENT},
         tweak=lambda d: _map_files(d, lambda f: replace(f, file_metadata=replace(f.file_metadata, group="nogroup"))),
         added=["CURRENT"], removed=["CURRENT"]),
    Case("owner-and-group-missing-from-a-lenient-read",
         local={"CURRENT": CURRENT},
         prev={"CURRENT": CURRENT},
         tweak=lambda d: _map_files(d, lambda f: replace(f, file_metadata=replace(f.file_metadata, owner="",
                                                                                  group=""))),
         added=["CURRENT"], removed=["CURRENT"]),
    Case("new-file",
         local={"CURRENT": CURRENT, "000002.sst": b"new"},
         prev={"CURRENT": CURRENT},
         added=["000002.sst"], retained=["CURRENT"]),
    Case("removed-file",
         local={"CURRENT": CURRENT},
         prev={"CURRENT": CURRENT, "000001.sst": b"old"},
         retained=["CURRENT"], removed=["000001.sst"]),
    Case("modified-same-size-crc-differs",
         local={"MANIFEST-000014": b"aaab"},
         prev={"MANIFEST-000014": b"aaaa"},
         added=["MANIFEST-000014"], removed=["MANIFEST-000014"]),
    Case("modified-size-differs",
         local={"OPTIONS-000016": b"longer"},
         prev={"OPTIONS-000016": b"short"},
         added=["OPTIONS-000016"], removed=["OPTIONS-000016"]),
    Case("large-sst-same-size-different-content-is-same",
         local={"000009.sst": b"b" * BIG},
         prev={"000009.sst": b"a" * BIG},
         retained=["000009.sst"]),
    Case("large-sst-different-size-is-not-same",
         local={"000009.sst": b"a" * (BIG + 1)},
         prev={"000009.sst": b"a" * BIG},
         added=["000009.sst"], removed=["000009.sst"]),
    Case("sst-of-exactly-1mib-is-crc-checked",
         local={"000009.sst": b"b" * MIB},
         prev={"000009.sst": b"a" * MIB},
         added=["000009.sst"], removed=["000009.sst"]),
    Case("large-non-sst-same-size-different-content-is-not-same",
         local={"MANIFEST-000014": b"b" * BIG},
         prev={"MANIFEST-000014": b"a" * BIG},
         added=["MANIFEST-000014"], removed=["MANIFEST-000014"]),
    Case("large-non-sst-identical-is-same",
         local={"000010.log": b"a" * BIG},
         prev={"000010.log": b"a" * BIG},
         retained=["000010.log"]),
    Case("owner-execute-bit-differs",
         local={"CURRENT": (CURRENT, 0o744)},
         prev={"CURRENT": (CURRENT, 0o644)},
         added=["CURRENT"], removed=["CURRENT"]),
    Case("owner-write-bit-differs",
         local={"CURRENT": (CURRENT, 0o444)},
         prev={"CURRENT": (CURRENT, 0o644)},
         added=["CURRENT"], removed=["CURRENT"]),
    Case("group-and-other-bits-differ",
         local={"CURRENT": (CURRENT, 0o600), "OPTIONS-000016": (b"o", 0o677)},
         prev={"CURRENT": (CURRENT, 0o644), "OPTIONS-000016": (b"o", 0o600)},
         retained=["CURRENT", "OPTIONS-000016"]),
    Case("index-checksum-differs-by-hand",
         local={"CURRENT": CURRENT},
         prev={"CURRENT": CURRENT},
         tweak=lambda d: _map_files(d, lambda f: replace(f, checksum=f.checksum ^ 1)),
         added=["CURRENT"], removed=["CURRENT"]),
    Case("nested-sub-dirs",
         local={"CURRENT": CURRENT,
                "kept": {"same": b"1", "changed": b"new", "new": b"n", "inner": {"x": b"x", "y": b"y"}},
                "fresh": {"f": b"f", "ff": {"g": b"g"}}},
         prev={"CURRENT": CURRENT,
               "kept": {"same": b"1", "changed": b"old", "gone": b"g", "inner": {"x": b"x"}},
               "dropped": {"d1": b"d", "dd": {"d2": b"d"}}},
         added=["fresh/f", "fresh/ff/g", "kept/changed", "kept/inner/y", "kept/new"],
         retained=["CURRENT", "kept/inner/x", "kept/same"],
         removed=["dropped/d1", "dropped/dd/d2", "kept/changed", "kept/gone"],
         added_dirs=["fresh", "fresh/ff"],
         retained_dirs=["kept", "kept/inner"],
         removed_dirs=["dropped"]),
    Case("removed-dir-inside-retained-dir",
         local={"kept": {"a": b"a"}},
         prev={"kept": {"a": b"a", "old": {"o": b"o"}}},
         retained=["kept/a"], removed=["kept/old/o"],
         retained_dirs=["kept"], removed_dirs=["kept/old"]),
    Case("empty-files",
         local={"a.log": b"", "b.log": b"b", "c": b"", "new.log": b""},
         prev={"a.log": b"", "b.log": b"", "c": b"c"},
         added=["b.log", "c", "new.log"], retained=["a.log"], removed=["b.log", "c"]),
    Case("empty-dirs",
         local={"kept-empty": {}, "new-empty": {}, "p": {"q": {}}},
         prev={"kept-empty": {}, "gone-empty": {}, "p": {}},
         added_dirs=["new-empty", "p/q"], retained_dirs=["kept-empty", "p"], removed_dirs=["gone-empty"]),
    Case("file-replaced-by-dir",
         local={"x": {"y": b"y"}},
         prev={"x": b"file"},
         added=["x/y"], removed=["x"], added_dirs=["x"]),
    Case("dir-replaced-by-file",
         local={"x": b"file"},
         prev={"x": {"y": b"y", "z": {"w": b"w"}}},
         added=["x"], removed=["x/y", "x/z/w"], removed_dirs=["x"]),
    Case("ignore-set",
         local={"CURRENT": CURRENT, "LOCK": b"", "OFFSET": b"22", "sub": {"LOCK": b"", "a": b"a"}},
         prev={"CURRENT": CURRENT, "OFFSET": b"1", "sub": {"OFFSET": b"1", "a": b"a"}},
         ignore=frozenset({"LOCK", "OFFSET"}),
         retained=["CURRENT", "sub/a"], retained_dirs=["sub"]),
    Case("ignore-predicate",
         local={"CURRENT": CURRENT, "LOG": b"l", "LOG.old.1718035261187": b"o", "LOGX": b"x"},
         prev={"LOG": b"old log"},
         ignore=lambda name: name == "LOG" or name.startswith("LOG.old."),
         added=["CURRENT", "LOGX"]),
]


@pytest.mark.parametrize("case", LOCAL_CASES, ids=[c.id for c in LOCAL_CASES])
def test_diff_local(tmp_path, case: Case):
    local = tmp_path / "local"
    build_tree(local, case.local)
    prev = None
    if case.prev is not None:
        build_tree(tmp_path / "prev", case.prev)
        prev = index_tree(tmp_path / "prev")
        if case.tweak:
            prev = case.tweak(prev)

    diff = diff_local(local, prev, ignore=case.ignore)

    assert diff.dir_name == ""
    assert sorted(p for p, _ in diff.added()) == case.added
    assert sorted(p for p, _ in diff.retained()) == case.retained
    assert sorted(p for p, _ in diff.removed()) == case.removed
    assert sorted(diff.added_dirs()) == case.added_dirs
    assert retained_dirs(diff) == case.retained_dirs
    assert sorted(diff.removed_dirs()) == case.removed_dirs
    assert diff.is_empty == (not (case.added or case.removed or case.added_dirs or case.removed_dirs))

    # Added entries describe the local file; removed ones are the previous index's own entries; retained ones
    # are the previous entries (blobs, checksum) with the local file's metadata.
    for path, lf in diff.added():
        assert isinstance(lf, LocalFile)
        assert lf.path == local / path
        assert lf.name == Path(path).name
        assert lf.size == (local / path).stat().st_size
        assert lf.crc == zlib.crc32((local / path).read_bytes())
    previous = dict(prev.walk_present()) if prev is not None else {}
    for path, fi in diff.removed():
        if previous[path].file_metadata.owner:
            assert fi is previous[path]
        else:  # made writable (see test_writable.py)
            assert (fi.file_name, fi.blobs, fi.checksum) == (previous[path].file_name, previous[path].blobs,
                                                             previous[path].checksum)
    for path, fi in diff.retained():
        old = previous[path]
        assert (fi.file_name, fi.blobs, fi.checksum) == (old.file_name, old.blobs, old.checksum)
        assert fi.file_metadata == local_metadata(local / path)


def test_diff_local_keeps_the_dir_index_of_removed_sub_dirs(tmp_path):
    build_tree(tmp_path / "prev", {"gone": {"a": b"a"}})
    prev = index_tree(tmp_path / "prev")
    build_tree(tmp_path / "local", {})
    diff = diff_local(tmp_path / "local", prev)
    assert diff.sub_dirs_removed == [prev.sub_dirs_present[0]]


def test_diff_local_rejects_symlinks(tmp_path):
    from statectl.errors import StatectlError

    build_tree(tmp_path / "local", {"CURRENT": CURRENT})
    (tmp_path / "local" / "link").symlink_to(tmp_path / "local" / "CURRENT")
    with pytest.raises(StatectlError) as exc:
        diff_local(tmp_path / "local", None)
    assert str(exc.value) == (f"unsupported file type at {tmp_path / 'local' / 'link'}: "
                              "only regular files and dirs can be backed up")


# ---- index against index -------------------------------------------------------------------------

def fi(name: str, *, size: int = 10, crc: int = 1234, perms: str = "rw-r--r--", blob: str = "",
       owner: str = "samza", mtime: int = 1718035261000) -> FileIndex:
    meta = FileMetadata(mtime, mtime, size, owner, "hadoop", perms)
    return FileIndex(name, (FileBlob(blob or f"blob-{name}", 0),), meta, crc)


def d(name: str, *entries) -> DirIndex:
    return DirIndex(name, tuple(e for e in entries if isinstance(e, FileIndex)), (),
                    tuple(e for e in entries if isinstance(e, DirIndex)), ())


@dataclass
class IndexCase:
    id: str
    new: DirIndex
    old: Optional[DirIndex]
    added: list[str] = field(default_factory=list)
    retained: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    added_dirs: list[str] = field(default_factory=list)
    retained_dirs: list[str] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    ignore: object = frozenset()


INDEX_CASES = [
    IndexCase("no-old-index", d("", fi("a"), d("sub", fi("b"))), None,
              added=["a", "sub/b"], added_dirs=["sub"]),
    IndexCase("same-files-other-blobs-times-owners",
              d("", fi("a", blob="new-a", mtime=5, owner="root"), d("sub", fi("b", blob="new-b"))),
              d("", fi("a"), d("sub", fi("b"))),
              retained=["a", "sub/b"], retained_dirs=["sub"]),
    IndexCase("checksum-differs", d("", fi("a", crc=1)), d("", fi("a", crc=2)),
              added=["a"], removed=["a"]),
    IndexCase("large-sst-checksum-differs", d("", fi("1.sst", size=2 * MIB, crc=1)),
              d("", fi("1.sst", size=2 * MIB, crc=2)),
              added=["1.sst"], removed=["1.sst"]),
    IndexCase("size-differs", d("", fi("a", size=1)), d("", fi("a", size=2)),
              added=["a"], removed=["a"]),
    IndexCase("owner-bits-differ", d("", fi("a", perms="r--r--r--")), d("", fi("a", perms="rw-r--r--")),
              added=["a"], removed=["a"]),
    IndexCase("group-other-bits-differ", d("", fi("a", perms="rw-------")), d("", fi("a", perms="rw-rw-rw-")),
              retained=["a"]),
    IndexCase("nested-dirs",
              d("", fi("a"), d("kept", fi("k"), fi("k2", crc=1)), d("fresh", fi("f"), d("ff"))),
              d("", fi("a"), d("kept", fi("k"), fi("k2", crc=2), fi("k3")), d("gone", fi("g"), d("gg", fi("h")))),
              added=["fresh/f", "kept/k2"], retained=["a", "kept/k"],
              removed=["gone/g", "gone/gg/h", "kept/k2", "kept/k3"],
              added_dirs=["fresh", "fresh/ff"], retained_dirs=["kept"], removed_dirs=["gone"]),
    IndexCase("file-replaced-by-dir", d("", d("x", fi("y"))), d("", fi("x")),
              added=["x/y"], removed=["x"], added_dirs=["x"]),
    IndexCase("ignore", d("", fi("CURRENT"), fi("OFFSET", crc=1)), d("", fi("CURRENT"), fi("OFFSET", crc=2)),
              ignore=frozenset({"OFFSET"}), retained=["CURRENT"]),
]


@pytest.mark.parametrize("case", INDEX_CASES, ids=[c.id for c in INDEX_CASES])
def test_diff_indexes(case: IndexCase):
    diff = diff_indexes(case.new, case.old, ignore=case.ignore)
    assert sorted(p for p, _ in diff.added()) == case.added
    assert sorted(p for p, _ in diff.retained()) == case.retained
    assert sorted(p for p, _ in diff.removed()) == case.removed
    assert sorted(diff.added_dirs()) == case.added_dirs
    assert retained_dirs(diff) == case.retained_dirs
    assert sorted(diff.removed_dirs()) == case.removed_dirs

    new_files = dict(case.new.walk_present())
    old_files = dict(case.old.walk_present()) if case.old is not None else {}
    for path, f in diff.added():
        assert f is new_files[path]
    for path, f in list(diff.retained()) + list(diff.removed()):
        assert f is old_files[path]
