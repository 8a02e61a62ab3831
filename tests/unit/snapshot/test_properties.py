"""Property tests: the index serde (round trip, Jackson's bytes, Samza's constructor checks), and DirDiff of a
local dir against a naive model of the same-file rule."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statectl.errors import IndexFormatError
from statectl.snapshot.diff import UNKNOWN_NAME, diff_local
from statectl.snapshot.model import (DirIndex, FileBlob, FileIndex, FileMetadata, SnapshotIndex, SnapshotMetadata,
                                     mode_to_permissions, parse_index, serialize_index)
from tests.unit.formats.test_jackson import jackson_model
from tests.unit.snapshot.test_diff import index_tree, local_metadata

LONG = st.integers(min_value=0, max_value=2 ** 63 - 1)
# Any text a Samza index can carry, non-BMP characters and controls included; no lone surrogates (a JSON
# reader cannot tell them from a pair split in two).
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
# The chars Java's Character.isWhitespace takes (and U+180E, as Java 8 did): StringUtils.isBlank is a string
# of nothing else. The non-breaking spaces U+00A0, U+2007 and U+202F are not among them.
JAVA_WHITESPACE = frozenset(" \t\n\x0b\f\r\x1c\x1d\x1e\x1f\u1680\u180e\u205f\u3000\u2028\u2029"
                            "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2008\u2009\u200a")


def not_blank(s: str) -> bool:
    return any(c not in JAVA_WHITESPACE for c in s)


BLANK = st.sampled_from(["", " ", "\t", "\u3000", "\u2028", " \x1f\n"])
# Built, not filtered: hypothesis validates a filtered strategy again at each draw (the validation re-runs its
# constructor, which forgets that it ran), and that was most of these tests' CPU. A blank string gets a
# character more, a name also when it is "." or ".." (names never hold "/", a backslash or NUL).
NOT_BLANK = TEXT.map(lambda s: s if not_blank(s) else s + "x")
NAME = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\\\x00"), max_size=12).map(
    lambda s: s if not_blank(s) and s not in (".", "..") else s + "n")
CHECKPOINT_ID = st.one_of(
    st.builds(lambda a, b: f"{a}-{b}", LONG, st.integers(0, 999999)),
    st.sampled_from(["+1-2", "007-1", "1-2-3", "\u0661-\u0662", "\uff11-2"]),  # odd, but Samza reads them
)


@st.composite
def file_indexes(draw, name: str, text=NOT_BLANK, times=LONG) -> FileIndex:
    size = draw(LONG)
    offsets = sorted(set(draw(st.lists(st.integers(0, max(0, size - 1)), max_size=3))) | ({0} if size else set()))
    blobs = tuple(FileBlob(f"blobs/{draw(TEXT)}", o) for o in offsets)
    meta = FileMetadata(draw(times), draw(times), size, draw(text), draw(text),
                        mode_to_permissions(draw(st.integers(0, 0o777))))
    return FileIndex(name, blobs, meta, draw(st.integers(0, 2 ** 32 - 1)))


@st.composite
def dir_indexes(draw, name: str = "", depth: int = 0, **kw) -> DirIndex:
    names = draw(st.lists(NAME, unique=True, max_size=5))
    n_dirs = draw(st.integers(0, len(names) if depth < 2 else 0))
    dirs, files = names[:n_dirs], names[n_dirs:]

    def removed_files() -> tuple[FileIndex, ...]:
        # Not named like a present file: an empty file equal to a present one would be both present and
        # removed, which Samza refuses (tested by example in test_writable.py).
        removed = [n for n in draw(st.lists(NAME, unique=True, max_size=2)) if n not in names]
        return tuple(draw(file_indexes(n, **kw)) for n in removed)

    return DirIndex(
        name,
        tuple(draw(file_indexes(n, **kw)) for n in files),
        removed_files(),
        tuple(draw(dir_indexes(d, depth + 1, **kw)) for d in dirs),
        tuple(DirIndex(n, removed_files()) for n in draw(st.lists(NAME, unique=True, max_size=2))),
    )


def _unique_blob_ids(d: DirIndex, counter: list[int]) -> DirIndex:
    """Number every blob: Samza refuses a blob both present and removed, which random ids could make."""
    def files(fs):
        out = []
        for f in fs:
            blobs = []
            for b in f.blobs:
                counter[0] += 1
                blobs.append(replace(b, blob_id=f"{b.blob_id}/{counter[0]}"))
            out.append(replace(f, blobs=tuple(blobs)))
        return tuple(out)

    return DirIndex(d.dir_name, files(d.files_present), files(d.files_removed),
                    tuple(_unique_blob_ids(s, counter) for s in d.sub_dirs_present),
                    tuple(_unique_blob_ids(s, counter) for s in d.sub_dirs_removed))


# What the regex blobs/[0-9a-f]{2}/[0-9a-f]{8} matches, built (from_regex filters: see NOT_BLANK).
BLOB_ID = st.builds("blobs/{:02x}/{:08x}".format, st.integers(0, 0xFF), st.integers(0, 0xFFFFFFFF))


@st.composite
def snapshot_indexes(draw, text=NOT_BLANK, times=LONG) -> SnapshotIndex:
    meta = SnapshotMetadata(draw(CHECKPOINT_ID), draw(text), draw(text), draw(text), draw(text))
    prev = draw(st.none() | BLOB_ID)
    root = _unique_blob_ids(draw(dir_indexes(text=text, times=times)), [0])
    return SnapshotIndex(draw(LONG), meta, root, prev)


@settings(max_examples=100, deadline=None)
@given(snapshot_indexes())
def test_index_serde_round_trip(index: SnapshotIndex):
    data = serialize_index(index)
    assert parse_index(data) == index
    assert serialize_index(parse_index(data)) == data


# ---- the bytes, against a model of Jackson's UTF8JsonGenerator ------------------------------------

def _j(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    return jackson_model(v, escape_surrogates=True)


def _obj(*pairs) -> str:
    return "{" + ",".join(f'"{k}":{v}' for k, v in pairs) + "}"


def _file_json(f: FileIndex) -> str:
    m = f.file_metadata
    return _obj(("file-name", _j(f.file_name)),
                ("blobs", "[" + ",".join(_obj(("blob-id", _j(b.blob_id)), ("offset", _j(b.offset)))
                                         for b in f.blobs) + "]"),
                ("file-metadata", _obj(("creation-time-millis", _j(m.creation_time_millis)),
                                       ("last-modified-time-millis", _j(m.last_modified_time_millis)),
                                       ("size", _j(m.size)), ("owner", _j(m.owner)), ("group", _j(m.group)),
                                       ("permissions", _j(m.permissions)))),
                ("checksum", _j(f.checksum)))


def _dir_json(d: DirIndex) -> str:
    def listed(xs, fn):
        return "[" + ",".join(fn(x) for x in xs) + "]"

    return _obj(("dir-name", _j(d.dir_name)), ("files-present", listed(d.files_present, _file_json)),
                ("files-removed", listed(d.files_removed, _file_json)),
                ("sub-dirs-present", listed(d.sub_dirs_present, _dir_json)),
                ("sub-dirs-removed", listed(d.sub_dirs_removed, _dir_json)))


def expected_bytes(i: SnapshotIndex) -> bytes:
    """The index as Samza writes it, built by hand: the mixins' creator-property order, Jackson's escapes."""
    m = i.snapshot_metadata
    return _obj(("creation-time-millis", _j(i.creation_time_millis)),
                ("snapshot-metadata", _obj(("checkpoint-id", _j(m.checkpoint_id)), ("job-name", _j(m.job_name)),
                                           ("job-id", _j(m.job_id)), ("task-name", _j(m.task_name)),
                                           ("store-name", _j(m.store_name)))),
                ("dir-index", _dir_json(i.dir_index)),
                ("prev-snapshot-index-blob-id", _j(i.prev_snapshot_index_blob_id))).encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(snapshot_indexes())
def test_index_bytes_are_jacksons(index: SnapshotIndex):
    data = serialize_index(index)
    assert data == expected_bytes(index)
    assert data.isascii() or not any(0xF0 <= b for b in data)  # non-BMP only ever as \uXXXX\uXXXX


# ---- what Samza's constructors refuse ------------------------------------------------------------

def _blank_fields(i: SnapshotIndex) -> list[str]:
    """A naive list of the blank strings and negative times Samza's constructors would refuse."""
    m = i.snapshot_metadata
    found = [k for k, v in (("job", m.job_name), ("job-id", m.job_id), ("task", m.task_name),
                            ("store", m.store_name)) if not not_blank(v)]

    def walk(d: DirIndex):
        for f in d.files_present + d.files_removed:
            fm = f.file_metadata
            found.extend(k for k, v in (("owner", fm.owner), ("group", fm.group)) if not not_blank(v))
            found.extend(k for k, v in (("ctime", fm.creation_time_millis), ("mtime", fm.last_modified_time_millis))
                         if v < 0)
        for s in d.sub_dirs_present + d.sub_dirs_removed:
            walk(s)

    walk(i.dir_index)
    return found


@settings(max_examples=100, deadline=None)
@given(snapshot_indexes(text=NOT_BLANK | BLANK, times=st.integers(-2, 2) | LONG))
def test_serializer_refuses_exactly_what_samza_would_refuse(index: SnapshotIndex):
    problems = _blank_fields(index)
    if problems:
        with pytest.raises(IndexFormatError) as exc:
            serialize_index(index)
        assert str(exc.value).startswith("cannot write index: ")
    else:
        assert parse_index(serialize_index(index)) == index


# ---- DirDiff against a model ---------------------------------------------------------------------

CONTENT = st.sampled_from([b"", b"x", b"y", b"xy"])
MODE = st.sampled_from([0o644, 0o600, 0o755])
SMALL_NAME = st.sampled_from(["a", "b", "CURRENT", "000001.sst"])
# How the previous index recorded a file's owner: as this host names it, as another host did, or not at all.
OWNER = st.sampled_from(["local", "local", "other", "missing"])


def trees(depth: int = 0, owners: bool = False):
    leaf = st.tuples(CONTENT, MODE, OWNER) if owners else st.tuples(CONTENT, MODE)
    if depth >= 2:
        return st.dictionaries(SMALL_NAME, leaf, max_size=3)
    return st.dictionaries(SMALL_NAME, leaf | trees(depth + 1, owners), max_size=4)


def build(root: Path, tree: dict) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, value in tree.items():
        if isinstance(value, dict):
            build(root / name, value)
        else:
            (root / name).write_bytes(value[0])
            os.chmod(root / name, value[1])


def all_files(tree: dict, prefix: str = "") -> list[str]:
    out = []
    for name, value in tree.items():
        out += all_files(value, f"{prefix}{name}/") if isinstance(value, dict) else [prefix + name]
    return out


def model(new: dict, old: dict, prefix: str = "") -> tuple[list[str], list[str], list[str]]:
    """(added, retained, removed) by the same-file rule: same name, bytes, owner bits and owner/group names
    (the old side's names are this host's unless the leaf says otherwise); files compare with files and dirs
    with dirs."""
    added, retained, removed = [], [], []
    for name, value in new.items():
        path = prefix + name
        before = old.get(name)
        if isinstance(value, dict):
            sub = model(value, before if isinstance(before, dict) else {}, path + "/")
            added, retained, removed = added + sub[0], retained + sub[1], removed + sub[2]
        elif (isinstance(before, tuple) and before[0] == value[0] and before[1] & 0o700 == value[1] & 0o700
              and before[2:] in ((), ("local",))):
            retained.append(path)
        else:
            added.append(path)
            if isinstance(before, tuple):
                removed.append(path)
    for name, before in old.items():
        now = new.get(name)
        if isinstance(before, dict) and not isinstance(now, dict):
            removed += all_files(before, prefix + name + "/")
        elif isinstance(before, tuple) and not isinstance(now, tuple):
            removed.append(prefix + name)
    return sorted(added), sorted(retained), sorted(removed)


def recorded_owners(index: DirIndex, tree: dict) -> DirIndex:
    """``index`` with each file's owner and group as the tree's leaf says: another host's, or missing
    (as a lenient read of an index without them gives)."""
    def fix(f: FileIndex, how: str) -> FileIndex:
        names = {"local": None, "other": ("someone", "elsewhere"), "missing": ("", "")}[how]
        return f if names is None else replace(f, file_metadata=replace(f.file_metadata, owner=names[0],
                                                                        group=names[1]))

    return replace(index,
                   files_present=tuple(fix(f, tree[f.file_name][2]) for f in index.files_present),
                   sub_dirs_present=tuple(recorded_owners(s, tree[s.dir_name]) for s in index.sub_dirs_present))


def new_dir_index(diff) -> DirIndex:
    """The next index's DirIndex, as a backup builds it (added files get fresh blobs)."""
    files = [FileIndex(f.name, (FileBlob(f"blobs/new/{f.path}", 0),) if f.size else (), f.metadata, f.crc)
             for f in diff.files_added] + list(diff.files_retained)
    return DirIndex(diff.dir_name, tuple(sorted(files, key=lambda f: f.file_name)), tuple(diff.files_removed),
                    tuple(new_dir_index(d) for d in diff.sub_dirs_added + diff.sub_dirs_retained),
                    tuple(diff.sub_dirs_removed))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), trees(owners=True))
def test_diff_local_matches_the_model(new: dict, old: dict):
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp, "old"), old)
        build(Path(tmp, "new"), new)
        previous = recorded_owners(index_tree(Path(tmp, "old")), old)
        diff = diff_local(Path(tmp, "new"), previous)
        got = (sorted(p for p, _ in diff.added()), sorted(p for p, _ in diff.retained()),
               sorted(p for p, _ in diff.removed()))
        assert got == model(new, old)

        # Retained entries describe the local file; the next index is one Samza can read, whatever the
        # previous one lacked, and a removed entry that lacked its owner says so.
        for path, f in diff.retained():
            assert f.file_metadata == local_metadata(Path(tmp, "new", path))
        for _, f in diff.removed():
            assert f.file_metadata.owner and f.file_metadata.group
        index = SnapshotIndex(1, SnapshotMetadata("1-1", "job", "1", "Partition 0", "store"), new_dir_index(diff),
                              "blobs/prev")
        assert parse_index(serialize_index(index)) == index
        assert {f.file_metadata.owner for _, f in diff.removed()} <= \
            {local_metadata(Path(tmp, "old", p)).owner for p in all_files(old)} | {"someone", UNKNOWN_NAME}
