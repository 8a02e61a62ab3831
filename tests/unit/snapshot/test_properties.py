"""Property tests: the index serde round trip, and DirDiff of a local dir against a model of the rule."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statectl.snapshot.diff import diff_local
from statectl.snapshot.model import (DirIndex, FileBlob, FileIndex, FileMetadata, SnapshotIndex, SnapshotMetadata,
                                     mode_to_permissions, parse_index, serialize_index)
from tests.unit.snapshot.test_diff import index_tree

LONG = st.integers(min_value=0, max_value=2 ** 63 - 1)
# Any text a Samza index can carry: no lone surrogates (not UTF-8). Names also exclude what restore refuses.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
NAME = TEXT.filter(lambda s: s not in ("", ".", "..") and not any(c in s for c in "/\\\x00"))


@st.composite
def file_indexes(draw, name: str) -> FileIndex:
    size = draw(LONG)
    offsets = sorted(set(draw(st.lists(st.integers(0, max(0, size - 1)), max_size=3))) | ({0} if size else set()))
    blobs = tuple(FileBlob(draw(st.from_regex(r"blobs/[0-9a-f]{2}/[0-9a-f]{8}", fullmatch=True)), o) for o in offsets)
    meta = FileMetadata(draw(LONG), draw(LONG), size, draw(TEXT), draw(TEXT),
                        mode_to_permissions(draw(st.integers(0, 0o777))))
    return FileIndex(name, blobs, meta, draw(st.integers(0, 2 ** 32 - 1)))


@st.composite
def dir_indexes(draw, name: str = "", depth: int = 0) -> DirIndex:
    names = draw(st.lists(NAME, unique=True, max_size=5))
    n_dirs = draw(st.integers(0, len(names) if depth < 2 else 0))
    dirs, files = names[:n_dirs], names[n_dirs:]

    def removed_files() -> tuple[FileIndex, ...]:
        return tuple(draw(file_indexes(n)) for n in draw(st.lists(NAME, unique=True, max_size=2)))

    return DirIndex(
        name,
        tuple(draw(file_indexes(n)) for n in files),
        removed_files(),
        tuple(draw(dir_indexes(d, depth + 1)) for d in dirs),
        tuple(DirIndex(n, removed_files()) for n in draw(st.lists(NAME, unique=True, max_size=2))),
    )


@st.composite
def snapshot_indexes(draw) -> SnapshotIndex:
    meta = SnapshotMetadata(f"{draw(LONG)}-{draw(st.integers(0, 999999))}", draw(TEXT), draw(TEXT), draw(TEXT),
                            draw(TEXT))
    prev = draw(st.none() | st.from_regex(r"blobs/[0-9a-f]{2}/[0-9a-f]{8}", fullmatch=True))
    return SnapshotIndex(draw(LONG), meta, draw(dir_indexes()), prev)


@settings(max_examples=200, deadline=None)
@given(snapshot_indexes())
def test_index_serde_round_trip(index: SnapshotIndex):
    data = serialize_index(index)
    assert parse_index(data) == index
    assert serialize_index(parse_index(data)) == data


# ---- DirDiff against a model ---------------------------------------------------------------------

CONTENT = st.sampled_from([b"", b"x", b"y", b"xy"])
MODE = st.sampled_from([0o644, 0o600, 0o755])
SMALL_NAME = st.sampled_from(["a", "b", "CURRENT", "000001.sst"])


def trees(depth: int = 0):
    leaf = st.tuples(CONTENT, MODE)
    if depth >= 2:
        return st.dictionaries(SMALL_NAME, leaf, max_size=3)
    return st.dictionaries(SMALL_NAME, leaf | trees(depth + 1), max_size=4)


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
    """(added, retained, removed) by the same-file rule: same name, bytes and owner bits (this host's
    names on both sides); files compare with files and dirs with dirs."""
    added, retained, removed = [], [], []
    for name, value in new.items():
        path = prefix + name
        before = old.get(name)
        if isinstance(value, dict):
            sub = model(value, before if isinstance(before, dict) else {}, path + "/")
            added, retained, removed = added + sub[0], retained + sub[1], removed + sub[2]
        elif isinstance(before, tuple) and before[0] == value[0] and before[1] & 0o700 == value[1] & 0o700:
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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), trees())
def test_diff_local_matches_the_model(new: dict, old: dict):
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp, "old"), old)
        build(Path(tmp, "new"), new)
        diff = diff_local(Path(tmp, "new"), index_tree(Path(tmp, "old")))
        got = (sorted(p for p, _ in diff.added()), sorted(p for p, _ in diff.retained()),
               sorted(p for p, _ in diff.removed()))
        assert got == model(new, old)
