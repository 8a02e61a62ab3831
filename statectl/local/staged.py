"""Build a store aside and swap it into place: the one way statectl replaces a store dir.

A store (restored from a snapshot, replayed from a changelog, promoted from a standby, loaded as a new
adstore version, rescaled) is written into a temporary sibling of its target, fsynced, and swapped in by
one atomic rename (``renameat2(RENAME_EXCHANGE)`` where the kernel has it). Until the swap the target is
untouched; a failure or a kill leaves only the temporary dir, which the next staging beside the target
removes once its pid is gone. Also here: the checks that refuse a target no restore may replace.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from pathlib import Path
from types import TracebackType
from typing import Callable

from statectl.errors import DiskFullError, LockHeldError, StatectlError, UsageError
from statectl.fsutil import chown_tree, fsync_dir, fsync_dirs, fsync_tree, make_dirs, owner_of, process_alive
from statectl.progress import ProgressReporter
from statectl.rocks.store import check_not_held, is_store

TMP_INFIX = ".statectl-restore-"

OLD_INFIX = ".statectl-old-"


def check_free_space(target: Path, need: int) -> None:
    """Raise DiskFullError when the filesystem that will hold ``target`` has fewer than ``need`` bytes
    free for this user, before anything is written. (A disk that fills meanwhile still fails the
    restore cleanly: the writes report ENOSPC.)"""
    where = target.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        st = os.statvfs(where)
    except OSError:
        return  # nothing to go by: the writes will tell
    free = st.f_bavail * st.f_frsize
    if need > free:
        raise DiskFullError(f"no space left on device for restoring into {target}: the snapshot needs {need} bytes "
                            f"more, {free} are free; the old store is untouched",
                            hint=f"free some space in {where}, or restore elsewhere with --target-dir")


def out_of_space(path: Path, *, below: int = 1 << 20) -> bool:
    """Whether the filesystem holding ``path`` has fewer than ``below`` bytes free for this user. For a
    failure whose own message does not say it (RocksDB, after a write hit a full disk, fails the next ones
    with "Writer has previous error"); False when nothing can be told."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        st = os.statvfs(where)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < below


def note_if_linked(asked: Path, target: Path, progress: ProgressReporter) -> None:
    """Say so when the target asked for reached ``target`` through a symlink (after the checks: a refused
    restore prints its error alone)."""
    path = Path(asked).absolute()
    if any(p.is_symlink() for p in (path, *path.parents)):
        progress.note(f"{path} is a symlink: restoring into {target}")


def resolve_target(path: Path, *, verb: str = "restore") -> Path:
    """The real path a restore writes to: symlinks (of the target itself or of its parents) are followed,
    so the store is built beside the real directory and swapped in there, and the link keeps pointing
    at it. Raises UsageError for a dangling link or a symlink loop, before anything is written."""
    path = Path(path).absolute()
    try:
        real = path.resolve()
    except (RuntimeError, OSError) as e:  # RuntimeError: a symlink loop (Python 3.11)
        raise UsageError(f"{verb} target {path} cannot be resolved: {e}") from None
    for link in (path, *path.parents):  # a dangling link anywhere on the way: never create what it names
        if link.is_symlink() and not link.exists():
            raise UsageError(f"{verb} target {path}: {link} is a symlink to {os.readlink(link)}, which does not exist",
                             hint="create the directory it points to, or pass another --target-dir")
    return real


def check_target(target: Path, force: bool, *, blob_root: Path | None = None, own_store: Path | None = None,
                 state_dir: Path | None = None, verb: str = "restore") -> None:
    """Refuse a target a restore must not replace, before anything is written.

    ``target`` is a resolved path (resolve_target). Refused (UsageError): a filesystem root or a mount
    point (a rename cannot replace it); a target inside a RocksDB store, or overlapping the ``file://``
    blob store at ``blob_root`` (inside it or containing it, by path or, for bind mounts and other
    aliases, by device and inode); another store's dir, or a dir holding stores, inside ``state_dir``
    (anything but ``own_store``); a target that is not a dir; a non-empty dir that is not a store unless
    ``force``, and even with ``force`` one that holds a RocksDB store, a mount point or the blob store.
    LockHeldError for a store held by a running process. ``verb`` names the operation in the messages
    (the hints are restore's: its --target-dir and --force).
    """
    if target.parent == target:
        raise UsageError(f"refusing to {verb} into {target}: it is the root of the filesystem")
    blob_id = _refuse_blob_store(target, blob_root, verb)
    _refuse_protected_place(target, own_store, state_dir, verb)
    if not os.path.lexists(target):
        return
    if not target.is_dir():
        raise UsageError(f"{verb} target {target} exists and is not a directory")
    if is_store(target):
        try:
            check_not_held(target)
        except LockHeldError as e:  # the hint of backup (--checkpoint-dir) does not apply to a restore
            hint = "stop the job that holds it, or restore elsewhere with --target-dir"
            raise LockHeldError(str(e), hint=hint) from None
        _check_replaceable(target, blob_id, allow_store=True)
        return
    if not any(target.iterdir()):
        return
    if not force:
        raise UsageError(f"{verb} target {target} is not empty and is not a RocksDB store",
                         hint="pick an empty or new --target-dir, or pass --force to replace it")
    _check_replaceable(target, blob_id, allow_store=False)


def _refuse_blob_store(target: Path, blob_root: Path | None, verb: str) -> tuple[int, int] | None:
    """Refuse a target overlapping the ``file://`` blob store at ``blob_root``, by path or by device and
    inode; the blob store dir's (device, inode), None without one."""
    if blob_root is None:
        return None
    root = Path(os.path.realpath(blob_root))
    if _within(target, root) or _within(root, target):
        raise UsageError(f"refusing to {verb} into {target}: it overlaps the blob store at {root}",
                         hint="restore into a dir outside the blob store (--target-dir)")
    blob_id = _dev_ino(root)
    for parent in (target, *target.parents):
        if blob_id is not None and _dev_ino(parent) == blob_id:
            raise UsageError(f"refusing to {verb} into {target}: {parent} is the blob store at {root} "
                             "(through a bind mount or another alias)",
                             hint="restore into a dir outside the blob store (--target-dir)")
    return blob_id


def _refuse_protected_place(target: Path, own_store: Path | None, state_dir: Path | None, verb: str) -> None:
    """Refuse a sealed adstore version, a dir inside a RocksDB store, a mount point, and another store's
    dir in ``state_dir`` (anything but ``own_store``)."""
    link = versioned_adstore(target)
    if link is not None:
        raise UsageError(f"refusing to {verb} into {target}: it is a sealed version of the versioned adstore "
                         f"{link}, which only adstore load and switch change", hint="restore into a dir outside the adstore's "
                         "versions (--target-dir); roll the adstore back with 'statectl adstore switch'")
    for parent in target.parents:
        if is_store(parent):
            raise UsageError(f"refusing to {verb} into {target}: it is inside the RocksDB store {parent}",
                             hint="pick a --target-dir outside any store")
    if target in _mount_points():
        raise UsageError(f"refusing to {verb} into {target}: it is a mount point, which a rename cannot replace",
                         hint="restore into a dir inside the mounted filesystem")
    own = Path(os.path.realpath(own_store)) if own_store is not None else None
    if state_dir is not None and target != own:
        state = Path(os.path.realpath(state_dir))
        if _within(target, state) and target != state and os.path.lexists(target) and is_store(target):
            raise UsageError(f"refusing to {verb} into {target}: it is another store's dir in the state dir {state}",
                             hint="restore a store into its own dir (--store, --task), or into a dir outside the "
                                  "state dir")


def versioned_adstore(path: Path) -> Path | None:
    """The versioned adstore (local.versions: a link ``S`` to ``S.versions/<n>``) whose versions dir holds
    the resolved ``path`` (or is it), else None. A sealed version is immutable: nothing but adstore load
    and switch may replace or delete it, whatever name reached it (the link ``S`` itself resolves there)."""
    for p in (path, *path.parents):
        if p.name.endswith(".versions") and len(p.name) > len(".versions"):
            link = p.with_name(p.name[:-len(".versions")])
            if link.is_symlink():
                return link
    return None


def _check_replaceable(target: Path, blob_id: tuple[int, int] | None, *, allow_store: bool) -> None:
    """A restore deletes the dir it replaces, all of it: walk it first (without following links) and refuse
    one that reaches other state: a mount point (bind mounts on the same filesystem included), the blob
    store under any name, or (unless ``allow_store``: the target is the store being replaced) a store."""
    mounts = [m for m in _mount_points() if _within(m, target) and m != target]
    if mounts:
        raise UsageError(f"refusing to replace {target}: {mounts[0]} is a mount point",
                         hint="unmount it, or pick an empty or new --target-dir")
    top_dev = os.lstat(target).st_dev
    for dirpath, dirnames, _ in os.walk(target):
        for name in dirnames:
            sub = Path(dirpath, name)
            ident = _dev_ino(sub, follow=False)
            if ident is None:
                continue
            if ident[0] != top_dev or os.path.ismount(sub):
                raise UsageError(f"refusing to replace {target}: {sub} is a mount point",
                                 hint="unmount it, or pick an empty or new --target-dir")
            if blob_id is not None and ident == blob_id:
                raise UsageError(f"refusing to replace {target}: {sub} is the blob store",
                                 hint="pick an empty or new --target-dir")
            if not allow_store and is_store(sub):
                raise UsageError(f"refusing to replace {target}: it holds the RocksDB store {sub}",
                                 hint="pick an empty or new --target-dir, or the store's own dir")


def _dev_ino(path: Path, *, follow: bool = True) -> tuple[int, int] | None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _mount_points() -> list[Path]:
    """Every mount point of this process's mount namespace (Linux /proc/self/mountinfo; bind mounts of a
    dir on its own filesystem included, which st_dev cannot tell); empty where unavailable."""
    import re

    try:
        text = Path("/proc/self/mountinfo").read_text(errors="surrogateescape")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:  # field 5 is the mount point, with space, tab, newline and \ as octal escapes
            out.append(Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4])))
    return out


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


_RENAME_EXCHANGE = 2

_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with renameat2(RENAME_EXCHANGE); False where unsupported."""
    import ctypes  # only a swap over an existing store needs it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_into_place(tmp: Path, target: Path) -> Path | None:
    """Put the complete new store at ``target`` atomically; return where the old store is now (for
    discard_old), or None when there was none. Once this returns the swap is done."""
    old: Path | None = None
    if not os.path.lexists(target):
        os.rename(tmp, target)
    elif _exchange(tmp, target):
        old = tmp  # tmp now holds the old store
    else:
        old = target.parent / f".{target.name}{OLD_INFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
        os.rename(tmp, target)
    fsync_dir(target.parent)
    return old


def discard_old(old: Path | None) -> str | None:
    """Delete the store a swap replaced. Best effort: the swap is done, so a failure here is a note
    (returned; the next staging beside it removes what is left), never an error."""
    if old is None:
        return None
    try:
        _remove(old)
    except OSError as e:
        return f"the replaced store was left at {old}: {e.strerror or e}"
    return None


def _remove(p: Path) -> None:
    if p.is_symlink() or not p.is_dir():
        p.unlink(missing_ok=True)
    else:
        shutil.rmtree(p)


def remove_dead_temp_dirs(target: Path) -> None:
    """Remove what restores that crashed left beside ``target`` (their pid is gone): temp dirs being
    built, and replaced stores not yet deleted."""
    if not target.parent.is_dir():
        return
    for infix in (TMP_INFIX, OLD_INFIX):
        prefix = f".{target.name}{infix}"
        for p in target.parent.iterdir():
            if not p.name.startswith(prefix):
                continue
            pid = p.name[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and not process_alive(int(pid)):
                try:
                    _remove(p)
                except OSError:
                    pass


class StagedStore:
    """A store dir built in a temporary sibling of ``target`` and swapped into place on ``commit()``.

    ::

        with StagedStore(target, what="restore", disk_full=lambda: DiskFullError(...)) as staged:
            build(staged.path)   # an empty dir beside target
            staged.commit()      # fsync, atomic swap; the replaced store is then deleted
        result.notes += staged.notes

    A caller whose staged store outlives one block (a load that stages some stores and builds them later)
    calls what the block calls: ``open()`` (as entering it), then ``commit()``, and ``abort()`` on every
    way out (as leaving it, without the error translation below; a no-op once committed).

    Contract: ``target`` (a resolved path whose parent may not exist yet) is untouched until ``commit()``
    returns, and replaced as a whole by it. Leaving the block without ``commit()``, by an exception or
    not, removes the temporary dir. Inside the block, ENOSPC/EDQUOT (an OSError or a DiskFullError from
    below) becomes ``disk_full()``, which names the target rather than the temporary dir; any other
    OSError becomes a StatectlError "<what> into <target> failed: ...". ``sync="tree"`` fsyncs every file
    and dir before the swap; ``sync="dirs"`` only the dirs (for builders whose writes fsync their files).
    Deleting the replaced store is best effort: a failure is a note in ``notes``, never an error.

    Owners: run as root, every file and dir the store holds when it is swapped in, and every parent of
    ``target`` ``open()`` makes, belong to ``owner``, by default (fsutil.owner_of) the owner of the store
    replaced, or where there is none of the nearest existing parent (the state dir): the job's user, who
    must write and delete them. As another user they are that user's (fsutil.chown_tree).
    """

    def __init__(self, target: Path, *, what: str, disk_full: Callable[[], DiskFullError], sync: str = "tree",
                 owner: tuple[int, int] | None = None):
        if sync not in ("tree", "dirs"):
            raise ValueError(f"sync must be 'tree' or 'dirs', not {sync!r}")
        self.target = Path(target)
        self.what = what
        self.disk_full = disk_full
        self.sync = sync
        self.path = self.target.parent / f".{self.target.name}{TMP_INFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.notes: list[str] = []
        self.committed = False
        self.owner = owner

    def open(self) -> "StagedStore":
        """Make the empty temporary dir (first removing what dead stagings left beside ``target``). Raises
        ``disk_full()``, or StatectlError for another OSError."""
        try:
            if self.owner is None:
                self.owner = owner_of(self.target)
            remove_dead_temp_dirs(self.target)
            make_dirs(self.target.parent, self.owner)
            self.path.mkdir()
        except OSError as e:
            raise self._error(e) from e
        except BaseException:  # SIGTERM (Terminated) right after the mkdir: a with block's __exit__ never runs
            self.abort()
            raise
        return self

    def __enter__(self) -> "StagedStore":
        return self.open()

    def commit(self) -> None:
        """Give what was built to ``owner``, fsync it, swap it into place, delete the store it replaced (best
        effort)."""
        assert self.owner is not None, "commit() before open()"
        chown_tree(self.path, self.owner)
        (fsync_tree if self.sync == "tree" else fsync_dirs)(self.path)
        old = swap_into_place(self.path, self.target)
        self.committed = True  # the swap is the commit: from here on the new store is in place
        note = discard_old(old)
        if note:
            self.notes.append(note)

    def abort(self) -> None:
        """Remove the temporary dir unless ``commit()`` swapped it in (then nothing). Never raises;
        idempotent: ``target`` stays as it was."""
        if not self.committed:
            shutil.rmtree(self.path, ignore_errors=True)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.committed:
            return
        self.abort()
        if isinstance(exc, OSError):
            raise self._error(exc) from exc
        if isinstance(exc, DiskFullError):  # raised deep in a write, naming a file of the temp dir
            raise self.disk_full() from exc

    def _error(self, e: OSError) -> StatectlError:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return self.disk_full()
        return StatectlError(f"{self.what} into {self.target} failed: {e}")
