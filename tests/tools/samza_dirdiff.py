"""A Python port of Samza's DirDiffUtil.areSameDir / areSameFile (org.apache.samza.storage.blobstore.util),
as BlobStoreRestoreManager.shouldRestore calls it to decide whether a local checkpoint dir is reused:
``areSameDir(FILES_TO_IGNORE, compareLargeFileChecksums=false, compareFileOwners=true)``. Written apart from
statectl, over the SnapshotIndex JSON as Samza writes it, so that a test does not check statectl against itself.

- getDirDiff: the local dir's files (``File::isFile``: symlinks followed) and sub-dirs (``File::isDirectory``)
  against the remote DirIndex's ``files-present`` and ``sub-dirs-present``. A file on both sides that is not
  the same is both removed and added.
- areSameDir: no removed files and no added files (names in filesToIgnore left out of both lists), no removed
  and no added sub-dirs, and every retained sub-dir the same (recursively, with compareLargeFileChecksums
  false and the same filesToIgnore).
- areSameFile: the same name; the same size; with compareFileOwners the same group and owner *names*; the same
  owner r/w/x permission bits; then, unless the file is over 1 MiB and compareLargeFileChecksums is false, the
  same CRC32 of its content.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import zlib
from pathlib import Path
from typing import Any

# BlobStoreRestoreManager.FILES_TO_IGNORE (StorageManagerUtil's names)
FILES_TO_IGNORE = frozenset({"OFFSET", "OFFSET-v2", "SIDE-INPUT-OFFSETS", "CHECKPOINT-V2"})


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(8 * 1024):
            crc = zlib.crc32(chunk, crc)
    return crc & 0xFFFFFFFF


def _name(fn: Any, ident: int) -> str:
    try:
        return fn(ident)
    except KeyError:
        return str(ident)


def are_same_file(local: Path, remote: dict, *, compare_large_file_checksums: bool, compare_file_owners: bool) -> bool:
    if local.name != remote["file-name"]:
        return False
    meta = remote["file-metadata"]
    st = os.stat(local)  # Files.readAttributes follows links
    same = st.st_size == meta["size"]
    if compare_file_owners:
        same = same and _name(lambda g: grp.getgrgid(g).gr_name, st.st_gid) == meta["group"] \
            and _name(lambda u: pwd.getpwuid(u).pw_name, st.st_uid) == meta["owner"]
    perms = meta["permissions"]  # PosixFilePermissions.fromString: "rwxr-x---"
    same = same and bool(st.st_mode & stat.S_IRUSR) == (perms[0] == "r") \
        and bool(st.st_mode & stat.S_IWUSR) == (perms[1] == "w") \
        and bool(st.st_mode & stat.S_IXUSR) == (perms[2] == "x")
    if not same:
        return False
    if not compare_large_file_checksums and st.st_size > 1024 * 1024:
        return True
    return _crc32(local) == remote["checksum"]


def are_same_dir(local: Path, remote_dir: dict, files_to_ignore: frozenset = FILES_TO_IGNORE, *,
                 compare_large_file_checksums: bool = False, compare_file_owners: bool = True,
                 why: list[str] | None = None) -> bool:
    """DirDiffUtil.areSameDir(filesToIgnore, compareLargeFileChecksums, compareFileOwners).test(local, remote);
    ``why`` collects the differences found."""
    why = why if why is not None else []
    entries = list(local.iterdir())
    local_files = {p.name: p for p in entries if p.is_file()}
    local_dirs = {p.name: p for p in entries if p.is_dir()}
    remote_files = {f["file-name"]: f for f in remote_dir.get("files-present", [])}
    remote_dirs = {d["dir-name"]: d for d in remote_dir.get("sub-dirs-present", [])}
    removed, added = [], []
    for name in set(remote_files) | set(local_files):
        if name in local_files and name in remote_files:
            if not are_same_file(local_files[name], remote_files[name],
                                 compare_large_file_checksums=compare_large_file_checksums,
                                 compare_file_owners=compare_file_owners):
                removed.append(name)
                added.append(name)
        elif name in local_files:
            added.append(name)
        else:
            removed.append(name)
    removed = [n for n in removed if n not in files_to_ignore]
    added = [n for n in added if n not in files_to_ignore]
    same = True
    if removed:
        why.append(f"{local}: missing or different: {sorted(removed)}")
        same = False
    if added:
        why.append(f"{local}: additional or different: {sorted(added)}")
        same = False
    if set(remote_dirs) - set(local_dirs):
        why.append(f"{local}: missing sub-dirs {sorted(set(remote_dirs) - set(local_dirs))}")
        same = False
    if set(local_dirs) - set(remote_dirs):
        why.append(f"{local}: additional sub-dirs {sorted(set(local_dirs) - set(remote_dirs))}")
        same = False
    for name in set(local_dirs) & set(remote_dirs):
        if not are_same_dir(local_dirs[name], remote_dirs[name], files_to_ignore,
                            compare_large_file_checksums=False, compare_file_owners=compare_file_owners, why=why):
            same = False
    return same


def should_restore(checkpoint_dir: Path, index: dict, *, clean_on_start: bool = False) -> bool:
    """BlobStoreRestoreManager.shouldRestore: False only when the checkpoint dir exists, the store is not
    cleaned on start, and the dir is the same as the snapshot's dir index."""
    if not checkpoint_dir.exists() or clean_on_start:
        return True
    return not are_same_dir(checkpoint_dir, index["dir-index"])
