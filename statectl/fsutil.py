"""The one home of statectl's small-file writes (atomic replace of a file, fsync of a dir or a tree), of
the owners of what statectl makes in a state dir (:func:`owner_of`, :func:`chown_tree`, :func:`make_dirs`)
and of the check whether a dead writer's leftovers may go (:func:`process_alive`).

Pure OS calls; no statectl imports (the bottom layer: formats, blobstore, local, engine and metrics use it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

SYNC_ALL, SYNC_FILE, SYNC_NONE = "file+dir", "file", "none"


def fsync_dir(path: Path | str) -> None:
    """fsync the dir ``path`` (its entries: a rename or a new file in it is then on disk). Raises OSError."""
    _fsync(path)


def fsync_file(path: Path | str) -> None:
    """fsync the file ``path`` (its data on disk; the GIL released while the disk writes). Raises OSError."""
    _fsync(path)


def fsync_dirs(root: Path | str) -> None:
    """fsync every dir under ``root``, children before parents, so that the entries of files made durable
    one by one (and hard links, whose data is already on disk) survive a power cut. Raises OSError."""
    for dirpath, _, _ in os.walk(root, topdown=False):
        _fsync(dirpath)


def fsync_tree(root: Path | str) -> None:
    """fsync every file, then every dir, under ``root`` (for a tree written by others, e.g. RocksDB), and
    nothing else: a filesystem-wide sync would also flush, and wait for, what other processes wrote."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            _fsync(os.path.join(dirpath, name))
        _fsync(dirpath)


def _fsync(path: Path | str) -> None:
    """fsync the file or dir ``path``, opened by its name read-only."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path | str, data: bytes | str, *, sync: str = SYNC_ALL, unique: bool = False) -> None:
    """Replace ``path`` with ``data`` (str: UTF-8) in one rename, so that a reader (or a crash) sees the old
    file or the new one, never a part. ``sync``: SYNC_ALL fsyncs the file before the rename and the dir
    after it (durable once this returns); SYNC_FILE only the file; SYNC_NONE neither (the caller syncs, or
    the file may be lost in a crash but never torn). The temporary file is ``<path>.tmp`` (Samza's name for
    its offset files), or with ``unique`` ``.<name>.<pid>.tmp`` (for writers that may run at once); it is
    removed when the write fails. Raises OSError; ``path`` is then as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp" if unique else f"{path.name}.tmp")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            if sync != SYNC_NONE:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    if sync == SYNC_ALL:
        fsync_dir(path.parent)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a zombie nobody reaped yet counts as gone): whether what it
    left (a staging dir, a recording named by its pid) may still be in use."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def owner_of(path: Path | str) -> tuple[int, int]:
    """The (uid, gid) that what statectl makes at ``path`` should have: those of ``path`` (following links:
    the store a restore replaces), or, where it does not exist, of its nearest existing parent (the state
    dir). Raises OSError when not even ``/`` can be stat'ed."""
    p = Path(path).absolute()
    while True:
        try:
            st = os.stat(p)
        except (FileNotFoundError, NotADirectoryError):
            if p == p.parent:
                raise
            p = p.parent
            continue
        return st.st_uid, st.st_gid


def chown_tree(root: Path | str, owner: tuple[int, int]) -> None:
    """Give ``root`` and everything under it to ``owner`` (uid, gid), links themselves and never what they
    point to, where owned otherwise: so that a job running as that user can write and delete what statectl,
    run as root, made in its state dir, and Samza's restore, which compares the owner and group names of a
    store's files with its snapshot's (DirDiffUtil.areSameFile), finds them. Run as any other user it does
    nothing: it cannot give files away (doctor says when its files would be another user's than the state
    dir's). Idempotent; raises OSError."""
    if os.geteuid() != 0:
        return
    uid, gid = owner
    root = os.fspath(root)
    if not _chown_entry(root, uid, gid):
        return
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            _chown_entry(os.path.join(dirpath, name), uid, gid)


def _chown_entry(path: str, uid: int, gid: int) -> bool:
    """lchown ``path`` unless it is owned so already; whether it is a dir (not a link to one)."""
    st = os.lstat(path)
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.lchown(path, uid, gid)
    return stat.S_ISDIR(st.st_mode)


def make_dirs(path: Path | str, owner: tuple[int, int]) -> None:
    """``mkdir -p path``: the dirs it makes are given to ``owner`` (:func:`chown_tree`: when run as root).
    Raises OSError."""
    path = Path(path)
    made = []
    p = path
    while not os.path.lexists(p) and p != p.parent:
        made.append(p)
        p = p.parent
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        for d in reversed(made):
            _chown_entry(os.fspath(d), *owner)
