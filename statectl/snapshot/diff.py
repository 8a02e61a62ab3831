"""DirDiff: what changed between a local directory (or a newer index) and a snapshot's DirIndex.

The same-file rule follows Samza's DirDiffUtil.areSameFile (FORMATS.md), as its backup uses it (owners
compared, large-file checksums skipped); see :func:`same_local_file`. Timestamps are not compared (a
restore changes them).

A local diff hands out index entries ready to be written into the next index: a retained file's entry
carries the local file's metadata, and removed entries are made writable (:func:`writable_removed`), so
an index read leniently (a file's owner missing, say) never leaks into an index Samza must read.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Callable, Iterator, Union

from statectl.errors import StatectlError, UnsafePathError
from statectl.formats.java import java_is_blank
from statectl.snapshot.crc import crc32
from statectl.snapshot.model import ROOT_DIR_NAME, DirIndex, FileIndex, FileMetadata, check_name, mode_to_permissions

LARGE_FILE_BYTES = 1024 * 1024
CRC_BUFFER = 1024 * 1024
_OWNER_BITS = stat.S_IRUSR | stat.S_IWUSR | stat.S_IXUSR
# Stands in for an owner or group name that a removed file's entry lacks (see writable_removed).
UNKNOWN_NAME = "unknown"


def file_crc32(path: str | os.PathLike[str]) -> int:
    """CRC32 of a whole file, unsigned."""
    crc = 0
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(CRC_BUFFER)
        view = memoryview(buf)
        while n := f.readinto(buf):
            crc = crc32(view[:n], crc)
    return crc


@dataclass
class LocalFile:
    """A regular file found in a local directory, with the attributes the same-file rule needs."""

    name: str
    path: Path
    size: int
    mode: int
    uid: int
    gid: int
    mtime_ms: int
    ctime_ms: int

    @classmethod
    def from_stat(cls, path: Path, st: os.stat_result) -> "LocalFile":
        return cls(path.name, path, st.st_size, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                   st.st_mtime_ns // 1_000_000, st.st_ctime_ns // 1_000_000)

    @cached_property
    def crc(self) -> int:
        return file_crc32(self.path)

    @property
    def owner(self) -> str:
        return owner_name(self.uid)

    @property
    def group(self) -> str:
        return group_name(self.gid)

    @property
    def metadata(self) -> FileMetadata:
        """The FileMetadata a backup records for this file, as Samza's FileMetadata.fromFile records it:
        times in millis (a time before 1970 as 0, which Samza's constructor requires), size, owner and
        group names, permission string."""
        return FileMetadata(max(self.ctime_ms, 0), max(self.mtime_ms, 0), self.size, self.owner, self.group,
                            mode_to_permissions(self.mode))


@lru_cache(maxsize=64)
def owner_name(uid: int) -> str:
    """The user name of ``uid`` (as Java's PosixFileAttributes.owner() names it), or the number."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@lru_cache(maxsize=64)
def group_name(gid: int) -> str:
    """The group name of ``gid``, or the number."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


Added = Union[LocalFile, FileIndex]


@dataclass
class DirDiff:
    """The recursive diff of a directory against a DirIndex (Samza's DirDiff).

    ``files_added`` holds LocalFiles when the new side is a local dir, FileIndexes when it is an index.
    """

    dir_name: str
    files_added: list[Added] = field(default_factory=list)
    files_retained: list[FileIndex] = field(default_factory=list)
    files_removed: list[FileIndex] = field(default_factory=list)
    sub_dirs_added: list["DirDiff"] = field(default_factory=list)
    sub_dirs_retained: list["DirDiff"] = field(default_factory=list)
    sub_dirs_removed: list[DirIndex] = field(default_factory=list)

    def walk(self, prefix: str = "") -> Iterator[tuple[str, "DirDiff"]]:
        """Yield (relative path prefix, DirDiff) for this dir and every added or retained sub-dir."""
        yield prefix, self
        for d in self.sub_dirs_added + self.sub_dirs_retained:
            yield from d.walk(prefix + d.dir_name + "/")

    def added(self) -> Iterator[tuple[str, Added]]:
        for prefix, d in self.walk():
            for f in d.files_added:
                yield prefix + _name(f), f

    def retained(self) -> Iterator[tuple[str, FileIndex]]:
        for prefix, d in self.walk():
            for f in d.files_retained:
                yield prefix + f.file_name, f

    def removed(self) -> Iterator[tuple[str, FileIndex]]:
        """Every removed file: removed files of this and kept sub-dirs, and all files of removed sub-dirs."""
        for prefix, d in self.walk():
            for f in d.files_removed:
                yield prefix + f.file_name, f
            for s in d.sub_dirs_removed:
                yield from s.walk_present(prefix + s.dir_name + "/")

    def removed_dirs(self) -> Iterator[str]:
        for prefix, d in self.walk():
            for s in d.sub_dirs_removed:
                yield prefix + s.dir_name

    def added_dirs(self) -> Iterator[str]:
        for prefix, d in self.walk():
            for s in d.sub_dirs_added:
                yield prefix + s.dir_name

    @property
    def is_empty(self) -> bool:
        return not (any(self.added()) or any(self.removed()) or any(self.removed_dirs()) or any(self.added_dirs()))


def _name(f: Added) -> str:
    return f.name if isinstance(f, LocalFile) else f.file_name


def same_local_file(local: LocalFile, remote: FileIndex) -> bool:
    """Samza's same-file rule for a local file against an indexed one, never looser than
    DirDiffUtil.areSameFile(compareLargeFileChecksums=false, compareFileOwners=true), as Samza's backup
    calls it: the same name and size; the same owner and group *names* (so a file whose owner or group
    changed, or whose entry lacks them, is uploaded again); the same owner r/w/x bits (group and other
    bits are not compared); and the same CRC32.

    Samza skips the CRC of every file over 1 MiB. statectl skips it only for ``*.sst`` files over 1 MiB,
    which RocksDB never modifies once written, and compares it for every other file whatever its size:
    stricter, as FORMATS.md allows. Reads the file (for its CRC) only when everything else matches.
    """
    if local.name != remote.file_name or local.size != remote.size:
        return False
    if local.mode & _OWNER_BITS != remote.file_metadata.mode & _OWNER_BITS:
        return False
    if (local.owner, local.group) != (remote.file_metadata.owner, remote.file_metadata.group):
        return False
    if local.size > LARGE_FILE_BYTES and local.name.endswith(".sst"):
        return True
    return local.crc == remote.checksum


def same_indexed_file(new: FileIndex, old: FileIndex) -> bool:
    """The same-file rule between two indexes: name, size, owner bits and CRC32 all equal."""
    return (
        new.file_name == old.file_name
        and new.size == old.size
        and new.checksum == old.checksum
        and new.file_metadata.mode & _OWNER_BITS == old.file_metadata.mode & _OWNER_BITS
    )


def scan_local(path: Path, adopt: tuple[int, int] | None = None) -> tuple[dict[str, LocalFile], dict[str, Path]]:
    """Regular files and sub-dirs of one local directory, by name. ``adopt`` (uid, gid): the files this
    process's user owns are taken as that owner's (see :func:`diff_local`).

    Raises StatectlError for entries that are neither (symlinks, sockets, devices): a RocksDB store
    holds none, and following them could read or write outside the store.
    """
    files: dict[str, LocalFile] = {}
    dirs: dict[str, Path] = {}
    with os.scandir(path) as it:
        for entry in it:
            p = Path(entry.path)
            _check_local_name(entry.name, p)
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                if java_is_blank(entry.name):  # Samza's FileIndex refuses a blank name (a dir may have one)
                    raise StatectlError(f"cannot back up {p}: a Samza index cannot record a file whose name is "
                                        "only whitespace", hint="RocksDB never makes such names: move the file "
                                        "out of the store dir")
                files[entry.name] = f = LocalFile.from_stat(p, st)
                if adopt is not None and f.uid == os.geteuid():
                    f.uid, f.gid = adopt
            elif stat.S_ISDIR(st.st_mode):
                dirs[entry.name] = p
            else:
                raise StatectlError(f"unsupported file type at {p}: only regular files and dirs can be backed up")
    return files, dirs


def _check_local_name(name: str, path: Path) -> None:
    """Refuse a name a Samza index cannot carry, before anything is uploaded: one that is not UTF-8 (the
    index is UTF-8 JSON), or one a restore would refuse as unsafe."""
    try:
        name.encode("utf-8")
        check_name(name, str(path.parent))
    except (UnicodeEncodeError, UnsafePathError):
        raise StatectlError(f"cannot back up {os.fsencode(path)!r}: its name is not valid UTF-8 or cannot be "
                            "restored safely, so a Samza index cannot record it",
                            hint="RocksDB never makes such names: move the file out of the store dir") from None


def _index_entries(d: DirIndex) -> tuple[dict[str, FileIndex], dict[str, DirIndex]]:
    return {f.file_name: f for f in d.files_present}, {s.dir_name: s for s in d.sub_dirs_present}


_EMPTY = DirIndex(ROOT_DIR_NAME)


Ignore = Union[frozenset, Callable[[str], bool]]


def diff_local(local_dir: Path, remote: DirIndex | None, *, same: Callable[[LocalFile, FileIndex], bool] = same_local_file,
               ignore: Ignore = frozenset(), adopt: tuple[int, int] | None = None) -> DirDiff:
    """Diff a local directory against a snapshot's DirIndex (None: no previous snapshot).

    File names in ``ignore`` (a set, or a predicate on the name) are left out on both sides, in the
    root dir and below. ``files_added`` are LocalFiles. A retained entry is the previous entry (name,
    blobs, checksum) with the local file's metadata (:attr:`LocalFile.metadata`); removed entries and
    removed sub-dirs are the previous ones, made writable by :func:`writable_removed` (the same objects
    when they already are). ``adopt`` (uid, gid): the files this process's user owns are compared and
    recorded as that owner's (a checkpoint statectl made of a store of another user, when it cannot give
    the files it made away). Raises StatectlError for an entry no Samza index can hold (see scan_local).
    """
    skip = ignore if callable(ignore) else ignore.__contains__
    return _diff_local(Path(local_dir), remote or _EMPTY, ROOT_DIR_NAME, same, skip, adopt)


def _diff_local(path: Path, remote: DirIndex, name: str, same, ignore, adopt) -> DirDiff:
    files, dirs = scan_local(path, adopt)
    return _diff_entries(name, files, dirs, remote, same, ignore,
                         lambda sub, old, sub_name: _diff_local(sub, old, sub_name, same, ignore, adopt),
                         _refreshed, writable_removed, _writable_removed_dir)


def _refreshed(local: LocalFile, previous: FileIndex) -> FileIndex:
    meta = local.metadata
    return previous if previous.file_metadata == meta else replace(previous, file_metadata=meta)


def writable_removed(f: FileIndex) -> FileIndex:
    """A previous index's entry, fit to be listed as removed in a new index: what Samza's FileMetadata
    requires and a lenient read may lack is filled in, a blank owner or group as :data:`UNKNOWN_NAME`, a
    negative time as 0. Samza only uses a removed entry to delete its blobs, so this loses nothing.
    Returns ``f`` itself when it needs nothing."""
    m = f.file_metadata
    fixed = replace(m, owner=UNKNOWN_NAME if java_is_blank(m.owner) else m.owner,
                    group=UNKNOWN_NAME if java_is_blank(m.group) else m.group,
                    creation_time_millis=max(m.creation_time_millis, 0),
                    last_modified_time_millis=max(m.last_modified_time_millis, 0))
    return f if fixed == m else replace(f, file_metadata=fixed)


def _writable_removed_dir(d: DirIndex) -> DirIndex:
    new = DirIndex(d.dir_name, tuple(map(writable_removed, d.files_present)),
                   tuple(map(writable_removed, d.files_removed)),
                   tuple(map(_writable_removed_dir, d.sub_dirs_present)),
                   tuple(map(_writable_removed_dir, d.sub_dirs_removed)))
    return d if new == d else new


def _as_is(new, old):
    return old


def _same_object(x):
    return x


def _diff_entries(name: str, files: dict, dirs: dict, old: DirIndex, same, ignore, recurse,
                  retain=_as_is, remove=_same_object, remove_dir=_same_object) -> DirDiff:
    """One level of a diff: ``files``/``dirs`` of the new side (local or indexed) against ``old``.

    ``retain(new, old)`` gives the entry of a retained file; ``remove``/``remove_dir`` map removed ones.
    """
    ofiles, odirs = _index_entries(old)
    out = DirDiff(name)
    for fname, nf in sorted(files.items()):
        if ignore(fname):
            continue
        of = ofiles.get(fname)
        if of is not None and same(nf, of):
            out.files_retained.append(retain(nf, of))
        else:
            out.files_added.append(nf)
            if of is not None:
                out.files_removed.append(remove(of))
    for fname, of in sorted(ofiles.items()):
        if fname not in files and not ignore(fname):
            out.files_removed.append(remove(of))
    for dname, nd in sorted(dirs.items()):
        od = odirs.get(dname)
        (out.sub_dirs_added if od is None else out.sub_dirs_retained).append(recurse(nd, od or DirIndex(dname), dname))
    for dname, od in sorted(odirs.items()):
        if dname not in dirs:
            out.sub_dirs_removed.append(remove_dir(od))
    return out


def diff_indexes(new: DirIndex, old: DirIndex | None, *, ignore: Ignore = frozenset()) -> DirDiff:
    """Diff two snapshots' DirIndexes: what ``new`` adds, keeps and removes relative to ``old``."""
    skip = ignore if callable(ignore) else ignore.__contains__
    return _diff_index(new, old or _EMPTY, ROOT_DIR_NAME, skip)


def _diff_index(new: DirIndex, old: DirIndex, name: str, ignore) -> DirDiff:
    files, dirs = _index_entries(new)
    return _diff_entries(name, files, dirs, old, same_indexed_file, ignore,
                         lambda sub, prev, sub_name: _diff_index(sub, prev, sub_name, ignore))


def build_dir_index(diff: DirDiff, uploaded: dict[int, FileIndex]) -> DirIndex:
    """The new snapshot's DirIndex from a local-vs-previous diff and the FileIndexes of its uploads
    (``uploaded``: id(LocalFile) -> FileIndex), as backup and rescale make it."""
    files = [uploaded[id(f)] for f in diff.files_added] + list(diff.files_retained)
    return DirIndex(
        dir_name=diff.dir_name,
        files_present=tuple(sorted(files, key=lambda f: f.file_name)),
        files_removed=tuple(diff.files_removed),
        sub_dirs_present=tuple(build_dir_index(d, uploaded) for d in diff.sub_dirs_added + diff.sub_dirs_retained),
        sub_dirs_removed=tuple(diff.sub_dirs_removed),
    )
