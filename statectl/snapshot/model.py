"""Samza's blob-store snapshot model and its JSON form.

Field names and shapes are those of org.apache.samza.storage.blobstore.index.serde (see FORMATS.md).
Reading ignores unknown fields and key order; ``serialize_index(parse_index(b))`` keeps every known
field of an index Samza could read, and ``parse_index(serialize_index(i)) == i`` for every index that
:func:`serialize_index` accepts.

Reading is strict about every field that decides what a restore writes or whose snapshot it is (Samza's
own classes reject them null): the dir lists, names, blobs, offsets, sizes, checksums, permissions and
the snapshot metadata. A lenient reader would turn ``"files-present": null`` into an empty store
restored over a good one. Only a file's times, owner and group, which describe it, may be missing
(times read as 0, as Samza reads them; owner and group as ``""``, which Samza would refuse). Numbers must
fit a Java long, as they do when Samza writes them.

Writing is strict: :func:`serialize_index` refuses an index that Samza's constructors would reject on
read (:func:`samza_problems`), so a lenient read never leaks into an index a Samza job must load. One
known gap: Samza reads a blob's ``offset`` as a Java int, and statectl cuts files over 2 GiB into
chunks at larger offsets; those offsets are written as they are.
"""

from __future__ import annotations

import json
import re
import stat
from dataclasses import dataclass, replace
from typing import Any, Iterator

from statectl.errors import IndexFormatError, UnsafePathError, UsageError
from statectl.formats.checkpoint_id import CheckpointFormatError, parse_checkpoint_id
from statectl.formats.jackson import to_json
from statectl.formats.java import java_is_blank

ROOT_DIR_NAME = ""
SCHEMA_VERSION = 1
JAVA_LONG_MAX = 2 ** 63 - 1
_DECIMAL = re.compile(r"-?[0-9]{1,19}")


@dataclass(frozen=True)
class FileBlob:
    blob_id: str
    offset: int


@dataclass(frozen=True)
class FileMetadata:
    creation_time_millis: int
    last_modified_time_millis: int
    size: int
    owner: str
    group: str
    permissions: str  # like "rw-r--r--"

    @property
    def mode(self) -> int:
        """The permission bits as an int (``rw-r--r--`` -> 0o644)."""
        return permissions_to_mode(self.permissions)


@dataclass(frozen=True)
class FileIndex:
    file_name: str
    blobs: tuple[FileBlob, ...]
    file_metadata: FileMetadata
    checksum: int  # CRC32 of the whole file, unsigned

    @property
    def size(self) -> int:
        return self.file_metadata.size


@dataclass(frozen=True)
class DirIndex:
    dir_name: str
    files_present: tuple[FileIndex, ...] = ()
    files_removed: tuple[FileIndex, ...] = ()
    sub_dirs_present: tuple["DirIndex", ...] = ()
    sub_dirs_removed: tuple["DirIndex", ...] = ()

    def walk_present(self, prefix: str = "") -> Iterator[tuple[str, FileIndex]]:
        """Yield (relative path, FileIndex) for every present file, recursively."""
        for f in self.files_present:
            yield prefix + f.file_name, f
        for d in self.sub_dirs_present:
            yield from d.walk_present(prefix + d.dir_name + "/")

    def present_dirs(self, prefix: str = "") -> Iterator[str]:
        """Yield the relative path of every present sub-dir, parents before children."""
        for d in self.sub_dirs_present:
            path = prefix + d.dir_name
            yield path
            yield from d.present_dirs(path + "/")

    def removed_files(self) -> Iterator[FileIndex]:
        """Every FileIndex this dir marks removed: removed files of present sub-dirs, and every file
        of removed sub-dirs (present or removed within them), recursively."""
        yield from self.files_removed
        for d in self.sub_dirs_present:
            yield from d.removed_files()
        for d in self.sub_dirs_removed:
            yield from _all_files(d)

    @property
    def total_size(self) -> int:
        return sum(f.size for _, f in self.walk_present())

    def with_owner(self, owner: str, group: str) -> "DirIndex":
        """This dir with every present file, here and below, recorded as ``owner``'s and ``group``'s (the
        names Samza's restore compares with the restored files': DirDiffUtil.areSameFile); removed entries
        as they are."""
        def file(f: FileIndex) -> FileIndex:
            return replace(f, file_metadata=replace(f.file_metadata, owner=owner, group=group))

        return replace(self, files_present=tuple(map(file, self.files_present)),
                       sub_dirs_present=tuple(d.with_owner(owner, group) for d in self.sub_dirs_present))


def parse_file_owner(text: str) -> tuple[str, str]:
    """``USER:GROUP`` (names, as the target job's host knows them) -> (user, group). UsageError (exit 2)
    unless both are there and neither is blank nor holds a ``:``."""
    user, sep, group = text.partition(":")
    if not sep or java_is_blank(user) or java_is_blank(group) or ":" in group or text != text.strip():
        raise UsageError(f"--file-owner {text!r}: expected USER:GROUP, the names of the target job's user and group")
    return user, group


def files_owner(dirs: list[DirIndex]) -> tuple[str, str] | None:
    """The owner and group most present files of ``dirs`` are recorded with, counting only their ``.sst``
    files where there are any (RocksDB writes those as the job's user; a backup an older statectl ran as
    root recorded root for the files its own checkpoint made); None when there are no files."""
    from collections import Counter

    files = [f for d in dirs for _, f in d.walk_present()]
    ssts = [f for f in files if f.file_name.endswith(".sst")] or files
    counts = Counter((f.file_metadata.owner, f.file_metadata.group) for f in ssts)
    return counts.most_common(1)[0][0] if counts else None


def _all_files(d: DirIndex) -> Iterator[FileIndex]:
    yield from d.files_present
    yield from d.files_removed
    for s in d.sub_dirs_present:
        yield from _all_files(s)
    for s in d.sub_dirs_removed:
        yield from _all_files(s)


@dataclass(frozen=True)
class SnapshotMetadata:
    checkpoint_id: str
    job_name: str
    job_id: str
    task_name: str
    store_name: str


@dataclass(frozen=True)
class SnapshotIndex:
    creation_time_millis: int
    snapshot_metadata: SnapshotMetadata
    dir_index: DirIndex
    prev_snapshot_index_blob_id: str | None = None

    def present_blob_ids(self) -> list[str]:
        """Blob ids of every present file chunk (not including the index blob itself)."""
        return [b.blob_id for _, f in self.dir_index.walk_present() for b in f.blobs]

    def removed_blob_ids(self) -> list[str]:
        """Blob ids this snapshot marks for deletion once it is committed."""
        return [b.blob_id for f in self.dir_index.removed_files() for b in f.blobs]

    def without_removed(self) -> "SnapshotIndex":
        return replace(self, dir_index=_strip_removed(self.dir_index))


def _strip_removed(d: DirIndex) -> DirIndex:
    return DirIndex(d.dir_name, d.files_present, (), tuple(_strip_removed(s) for s in d.sub_dirs_present), ())


# ---- permissions ----------------------------------------------------------------------------------

_PERM_BITS = (
    (stat.S_IRUSR, "r"), (stat.S_IWUSR, "w"), (stat.S_IXUSR, "x"),
    (stat.S_IRGRP, "r"), (stat.S_IWGRP, "w"), (stat.S_IXGRP, "x"),
    (stat.S_IROTH, "r"), (stat.S_IWOTH, "w"), (stat.S_IXOTH, "x"),
)


def mode_to_permissions(mode: int) -> str:
    """0o644 -> ``rw-r--r--`` (Java's PosixFilePermissions.toString form)."""
    return "".join(ch if mode & bit else "-" for bit, ch in _PERM_BITS)


def permissions_to_mode(perms: str) -> int:
    """``rw-r--r--`` -> 0o644; raises IndexFormatError for anything else."""
    if len(perms) != 9:
        raise IndexFormatError(f"invalid permissions {perms!r} in index")
    mode = 0
    for (bit, ch), got in zip(_PERM_BITS, perms):
        if got == ch:
            mode |= bit
        elif got != "-":
            raise IndexFormatError(f"invalid permissions {perms!r} in index")
    return mode


_VALID_PERMS = frozenset(mode_to_permissions(m) for m in range(0o1000))


# ---- JSON -----------------------------------------------------------------------------------------

def _blob_to_json(b: FileBlob) -> dict[str, Any]:
    return {"blob-id": b.blob_id, "offset": b.offset}


def _meta_to_json(m: FileMetadata) -> dict[str, Any]:
    return {
        "creation-time-millis": m.creation_time_millis,
        "last-modified-time-millis": m.last_modified_time_millis,
        "size": m.size,
        "owner": m.owner,
        "group": m.group,
        "permissions": m.permissions,
    }


def _file_to_json(f: FileIndex) -> dict[str, Any]:
    return {
        "file-name": f.file_name,
        "blobs": [_blob_to_json(b) for b in f.blobs],
        "file-metadata": _meta_to_json(f.file_metadata),
        "checksum": f.checksum,
    }


def dir_to_json(d: DirIndex) -> dict[str, Any]:
    return {
        "dir-name": d.dir_name,
        "files-present": [_file_to_json(f) for f in d.files_present],
        "files-removed": [_file_to_json(f) for f in d.files_removed],
        "sub-dirs-present": [dir_to_json(s) for s in d.sub_dirs_present],
        "sub-dirs-removed": [dir_to_json(s) for s in d.sub_dirs_removed],
    }


def index_to_json(i: SnapshotIndex) -> dict[str, Any]:
    m = i.snapshot_metadata
    return {
        "creation-time-millis": i.creation_time_millis,
        "snapshot-metadata": {
            "checkpoint-id": m.checkpoint_id,
            "job-name": m.job_name,
            "job-id": m.job_id,
            "task-name": m.task_name,
            "store-name": m.store_name,
        },
        "dir-index": dir_to_json(i.dir_index),
        "prev-snapshot-index-blob-id": i.prev_snapshot_index_blob_id,
    }


def serialize_index(i: SnapshotIndex) -> bytes:
    """The index as Samza's Jackson writes it, byte for byte (formats.jackson.to_json): UTF-8, compact,
    control characters as ``\\u001F``, non-BMP characters as escaped surrogate pairs.

    Raises IndexFormatError, writing nothing, for an index Samza could not read back
    (:func:`samza_problems`), e.g. one read leniently with a file's owner missing.
    """
    check_writable(i)
    return to_json(index_to_json(i))


# ---- what Samza's constructors accept ---------------------------------------------------------------

def check_writable(i: SnapshotIndex) -> None:
    """Raise IndexFormatError naming the first of :func:`samza_problems`, if there is one."""
    for problem in samza_problems(i):
        raise IndexFormatError(f"cannot write index: {problem}",
                               hint="Samza would refuse to read this index; it was probably built from an "
                                    "index that was read leniently")


def samza_problems(i: SnapshotIndex) -> Iterator[str]:
    """What Samza's index classes would reject when reading ``i`` (their constructors' Preconditions),
    one message per problem, in index order; nothing when Samza can read it:

    - SnapshotIndex: creation time >= 0; a previous index id, if any, not blank.
    - SnapshotMetadata: a checkpoint id CheckpointId.deserialize reads; job name, job id, task and store
      names not blank (commons-lang ``isBlank``: empty or whitespace only).
    - FileIndex, FileBlob, FileMetadata, for every file in the tree (present, removed, and in removed
      sub-dirs): a name and blob ids that are not blank; offsets, sizes and times >= 0; owner, group and
      permissions not blank (the permissions also valid); numbers within a Java long.
    - DirIndex, for every dir: no FileIndex both present and removed in it, and no blob both in its
      present files (with those of its present sub-dirs) and in its removed ones
      (validatePresentAndRemovedOverlap, reproduced with its exact reach).
    """
    if not 0 <= i.creation_time_millis <= JAVA_LONG_MAX:
        yield f"creation-time-millis {i.creation_time_millis} is out of range"
    if i.prev_snapshot_index_blob_id is not None and java_is_blank(i.prev_snapshot_index_blob_id):
        yield "prev-snapshot-index-blob-id is blank"
    m = i.snapshot_metadata
    try:
        parse_checkpoint_id(m.checkpoint_id)
    except CheckpointFormatError:
        yield f"snapshot-metadata.checkpoint-id {m.checkpoint_id!r} is not a checkpoint id Samza can read"
    for key, value in (("job-name", m.job_name), ("job-id", m.job_id), ("task-name", m.task_name),
                       ("store-name", m.store_name)):
        if java_is_blank(value):
            yield f"snapshot-metadata.{key} is blank"
    yield from _dir_problems(i.dir_index, "")


def _dir_problems(d: DirIndex, prefix: str) -> Iterator[str]:
    where = f"dir {prefix.rstrip('/')!r}" if prefix else "the root dir"
    for f in d.files_present:
        yield from _file_problems(f, prefix + f.file_name)
    for f in d.files_removed:
        yield from _file_problems(f, prefix + f.file_name + " (removed)")
    if d.files_removed and set(d.files_present) & set(d.files_removed):
        yield f"{where} lists the same file as present and removed"
    present: set[FileBlob] = {b for f in d.files_present for b in f.blobs}
    removed: set[FileBlob] = {b for f in d.files_removed for b in f.blobs}
    for s in d.sub_dirs_present:
        _add_present_sub_dir(s, present, removed)
    for s in d.sub_dirs_removed:
        _add_removed_sub_dir(s, removed)
    both = present & removed
    if both:
        yield f"{where} has blob {min(both, key=lambda b: (b.blob_id, b.offset)).blob_id!r} both present and removed"
    for s in d.sub_dirs_present:
        yield from _dir_problems(s, prefix + s.dir_name + "/")
    for s in d.sub_dirs_removed:
        yield from _dir_problems(s, prefix + s.dir_name + " (removed)/")


def _add_present_sub_dir(d: DirIndex, present: set[FileBlob], removed: set[FileBlob]) -> None:
    # DirIndex.addFilesAndBlobsForSubDir: a present sub-dir's own removed files are not counted.
    present.update(b for f in d.files_present for b in f.blobs)
    for s in d.sub_dirs_present:
        _add_present_sub_dir(s, present, removed)
    for s in d.sub_dirs_removed:
        _add_removed_sub_dir(s, removed)


def _add_removed_sub_dir(d: DirIndex, removed: set[FileBlob]) -> None:
    # DirIndex.addFilesAndBlobsForSubDirRemoved: nor are the removed sub-dirs of a removed sub-dir.
    removed.update(b for f in d.files_present + d.files_removed for b in f.blobs)
    for s in d.sub_dirs_present:
        _add_removed_sub_dir(s, removed)


def _file_problems(f: FileIndex, path: str) -> Iterator[str]:
    m = f.file_metadata
    if (0 <= m.creation_time_millis <= JAVA_LONG_MAX and 0 <= m.last_modified_time_millis <= JAVA_LONG_MAX
            and 0 <= m.size <= JAVA_LONG_MAX and 0 <= f.checksum <= JAVA_LONG_MAX and m.permissions in _VALID_PERMS
            and not java_is_blank(f.file_name) and not java_is_blank(m.owner) and not java_is_blank(m.group)
            and all(0 <= b.offset <= JAVA_LONG_MAX and not java_is_blank(b.blob_id) for b in f.blobs)):
        return  # the usual case, checked at the cost of one look at each field
    if java_is_blank(f.file_name):
        yield f"file {path!r} has a blank name"
    for b in f.blobs:
        if java_is_blank(b.blob_id):
            yield f"file {path!r} has a blob with a blank id"
        if not 0 <= b.offset <= JAVA_LONG_MAX:
            yield f"file {path!r} has a blob at offset {b.offset}"
    if not 0 <= f.checksum <= JAVA_LONG_MAX:
        yield f"file {path!r} has checksum {f.checksum}, out of range"
    meta = f.file_metadata
    for key, number in (("creation-time-millis", meta.creation_time_millis),
                        ("last-modified-time-millis", meta.last_modified_time_millis), ("size", meta.size)):
        if not 0 <= number <= JAVA_LONG_MAX:
            yield f"file {path!r} has {key} {number}, out of range"
    for key, text in (("owner", meta.owner), ("group", meta.group), ("permissions", meta.permissions)):
        if java_is_blank(text):
            yield f"file {path!r} has no {key}"
    if not java_is_blank(meta.permissions):
        try:
            permissions_to_mode(meta.permissions)
        except IndexFormatError:
            yield f"file {path!r} has invalid permissions {meta.permissions!r}"


class _Reader:
    """Typed field access with error messages that say where in the index a field is wrong."""

    def __init__(self, obj: Any, where: str):
        if not isinstance(obj, dict):
            raise IndexFormatError(f"malformed index: {where or 'top level'} is not a JSON object")
        self.obj = obj
        self.where = where

    def _get(self, key: str, types: tuple[type, ...], optional: bool = False, default: Any = None) -> Any:
        if key not in self.obj or self.obj[key] is None:
            if optional:
                return default
            what = "missing field" if key not in self.obj else "null in required field"
            raise IndexFormatError(f"malformed index: {what} {self._at(key)}")
        value = self.obj[key]
        if isinstance(value, bool) or not isinstance(value, types):
            raise IndexFormatError(f"malformed index: field {self._at(key)} has the wrong type")
        return value

    def _at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def str(self, key: str, optional: bool = False) -> Any:
        return self._get(key, (str,), optional)

    def int(self, key: str, optional: bool = False, default: int = 0) -> int:
        value = self._get(key, (int, str), optional, default)
        if isinstance(value, str):  # Jackson may write longs as strings when configured so
            if not _DECIMAL.fullmatch(value):
                raise IndexFormatError(f"malformed index: field {self._at(key)} is not a number")
            value = int(value)
        if not -JAVA_LONG_MAX - 1 <= value <= JAVA_LONG_MAX:
            raise IndexFormatError(f"malformed index: field {self._at(key)} does not fit a 64-bit long")
        return value

    def list(self, key: str) -> list[Any]:
        return self._get(key, (list,))

    def obj_(self, key: str) -> "_Reader":
        return _Reader(self._get(key, (dict,)), self._at(key))


def check_name(name: str, where: str, *, root: bool = False) -> str:
    """Reject a file or dir name that could escape the directory it is restored into.

    Raises UnsafePathError for "", ".", "..", names with "/" or NUL, and absolute paths.
    The root dir's name is "" and is allowed when ``root`` is true.
    """
    if root and name == ROOT_DIR_NAME:
        return name
    if name in ("", ".", "..") or "/" in name or "\x00" in name or "\\" in name:
        raise UnsafePathError(f"unsafe name {name!r} in index at {where}: it would escape the target dir")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, from a JSON escape such as \ud800: no file can have it
        raise IndexFormatError(f"malformed index: name {name!r} at {where} is not valid Unicode") from None
    return name


def _parse_blob(r: _Reader) -> FileBlob:
    offset = r.int("offset")
    if offset < 0:
        raise IndexFormatError(f"malformed index: negative offset at {r.where}")
    return FileBlob(r.str("blob-id"), offset)


def _parse_meta(r: _Reader) -> FileMetadata:
    size = r.int("size")
    if size < 0:
        raise IndexFormatError(f"malformed index: negative size at {r.where}")
    perms = r.str("permissions")
    permissions_to_mode(perms)
    # Times, owner and group describe the file but never decide what a restore writes: read leniently.
    return FileMetadata(
        creation_time_millis=r.int("creation-time-millis", optional=True),
        last_modified_time_millis=r.int("last-modified-time-millis", optional=True),
        size=size,
        owner=r.str("owner", optional=True) or "",
        group=r.str("group", optional=True) or "",
        permissions=perms,
    )


def _parse_file(r: _Reader) -> FileIndex:
    name = check_name(r.str("file-name"), r.where)
    if java_is_blank(name):  # FileIndex's constructor refuses it: no Samza job could load this index
        raise IndexFormatError(f"malformed index: blank file name {name!r} at {r.where}")
    blobs = tuple(_parse_blob(_Reader(b, f"{r.where}.blobs[{i}]")) for i, b in enumerate(r.list("blobs")))
    checksum = r.int("checksum")
    if not 0 <= checksum <= 0xFFFFFFFF:
        raise IndexFormatError(f"malformed index: checksum out of CRC32 range at {r.where}")
    return FileIndex(name, tuple(sorted(blobs, key=lambda b: b.offset)), _parse_meta(r.obj_("file-metadata")), checksum)


def _parse_dir(r: _Reader, root: bool) -> DirIndex:
    name = check_name(r.str("dir-name"), r.where, root=root)

    def files(key: str) -> tuple[FileIndex, ...]:
        return tuple(_parse_file(_Reader(f, f"{r.where}.{key}[{i}]")) for i, f in enumerate(r.list(key)))

    def dirs(key: str) -> tuple[DirIndex, ...]:
        return tuple(_parse_dir(_Reader(d, f"{r.where}.{key}[{i}]"), False) for i, d in enumerate(r.list(key)))

    d = DirIndex(name, files("files-present"), files("files-removed"), dirs("sub-dirs-present"), dirs("sub-dirs-removed"))
    seen: set[str] = set()
    for entry in [f.file_name for f in d.files_present] + [s.dir_name for s in d.sub_dirs_present]:
        if entry in seen:
            raise IndexFormatError(f"malformed index: {entry!r} is listed twice in {r.where}")
        seen.add(entry)
    return d


def parse_index(data: bytes | str) -> SnapshotIndex:
    """Parse Samza's SnapshotIndex JSON.

    Raises IndexFormatError for anything that is not a well-formed index (truncated JSON, wrong types,
    missing fields) and UnsafePathError for names that would escape a restore target.
    """
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise IndexFormatError(f"malformed index: not valid JSON ({e})") from None
    except RecursionError:
        raise IndexFormatError("malformed index: JSON nested too deeply") from None
    try:
        return _parse_index(obj)
    except RecursionError:
        raise IndexFormatError("malformed index: directories nested too deeply") from None


def _parse_index(obj: Any) -> SnapshotIndex:
    r = _Reader(obj, "")
    m = r.obj_("snapshot-metadata")
    meta = SnapshotMetadata(
        checkpoint_id=_id_str(m, "checkpoint-id"),
        job_name=m.str("job-name"),
        job_id=_id_str(m, "job-id"),
        task_name=m.str("task-name"),
        store_name=m.str("store-name"),
    )
    return SnapshotIndex(
        creation_time_millis=r.int("creation-time-millis"),
        snapshot_metadata=meta,
        dir_index=_parse_dir(_Reader(obj.get("dir-index"), "dir-index"), True),
        prev_snapshot_index_blob_id=r.str("prev-snapshot-index-blob-id", optional=True),
    )


def _id_str(r: _Reader, key: str, optional: bool = False) -> str:
    value = r._get(key, (str, int), optional, "")
    return str(value)
