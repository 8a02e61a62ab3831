"""restore: rebuild a store from a snapshot (seed 000 "Incremental backup and restore", ARCHITECTURE.md).

The store is built in a temporary sibling dir — identical local files hard-linked (immutable SSTs)
or copied, the rest downloaded in parallel and verified (size + CRC32) — and then swapped into place
atomically. The live dir is never half-written; the old store is deleted only after the new one is
complete and in place. Any failure removes the temporary dir and leaves the target as it was.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat as stat_mod
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from statectl.blobstore.base import BlobStore
from statectl.engine.checkpoints import BlobCheckpointStore
from statectl.engine.common import check_parallelism, resolve_snapshot, snapshot_owner
from statectl.engine.layout import StoreRef, checkpoint_dir, local_checkpoint_dirs
from statectl.engine.progress import NullProgress, ProgressReporter
from statectl.engine.transfer import DownloadItem, blob_ranges, download_files, run_parallel
from statectl.errors import (BlobNotFoundError, ChecksumMismatchError, CorruptSnapshotError, DiskFullError,
                             LockHeldError, StatectlError, UsageError)
from statectl.rocks.store import check_not_held, is_store
from statectl.snapshot.diff import LocalFile, same_local_file
from statectl.snapshot.model import FileIndex

DEFAULT_RANGE_SIZE = 16 * 1024 * 1024
TMP_INFIX = ".statectl-restore-"
OLD_INFIX = ".statectl-old-"
IMMUTABLE_SUFFIXES = (".sst", ".blob")


@dataclass(frozen=True)
class RestoreOptions:
    """What to restore where. ``target_dir`` defaults to the store dir; ``force`` allows replacing a
    non-empty target that is not a RocksDB store (never one that holds a store, the blob store or a
    mount point); ``from_other_store`` allows ``snapshot`` to name a snapshot of another job, task or
    store (a deliberate cross-restore)."""

    ref: StoreRef
    store_dir: Path
    target_dir: Path | None = None
    snapshot: str | None = None
    parallelism: int = 8
    range_size: int = DEFAULT_RANGE_SIZE
    force: bool = False
    from_other_store: bool = False

    def validate(self) -> None:
        check_parallelism(self.parallelism)
        if self.range_size < 1024 * 1024:
            raise UsageError("range size must be at least 1MiB")


@dataclass
class RestoreResult:
    snapshot_id: str
    checkpoint_id: str
    target_dir: str
    files_total: int
    files_downloaded: int
    files_reused: int
    bytes_total: int
    bytes_downloaded: int
    duration_s: float
    notes: list[str] = field(default_factory=list)


def restore(opts: RestoreOptions, blobstore: BlobStore, checkpoints: BlobCheckpointStore,
            progress: ProgressReporter | None = None) -> RestoreResult:
    """Restore a snapshot of ``opts.ref``; return what was downloaded and reused.

    Raises SnapshotNotFoundError (exit 10) for an unknown snapshot; LockHeldError (11) when the
    target store is held by a running process; CorruptSnapshotError subclasses for a malformed index,
    unsafe names, missing, short, long or damaged blobs; DiskFullError when the disk fills. In every
    error case the target dir is left exactly as it was.
    """
    opts.validate()
    progress = progress or NullProgress()
    started = time.monotonic()
    target = resolve_target(Path(opts.target_dir or opts.store_dir), progress)
    check_target(target, opts.force, blob_root=local_blobstore_root(blobstore.url))

    # A restore only reads the blob store: an interrupted cleanup is finished by the next backup or gc,
    # which hold the store's lease (and a restore may run with read-only credentials).
    snap = resolve_snapshot(blobstore, checkpoints, opts.ref, opts.snapshot, allow_other_store=opts.from_other_store)
    index = snap.index
    checkpoint_id = index.snapshot_metadata.checkpoint_id
    if snapshot_owner(index) != str(opts.ref):
        progress.note(f"restoring a snapshot of {snapshot_owner(index)} into {target} (--from-other-store)")
    files = list(index.dir_index.walk_present())
    for rel, fi in files:
        blob_ranges(fi, f"file {rel}")  # every file's blobs tile it, reused or not
    sources = _reuse_sources(opts.store_dir.absolute(), target, checkpoint_id)
    local = {rel: src for rel, fi in files if (src := _local_copy(sources, rel, fi)) is not None}
    to_fetch = [(rel, fi) for rel, fi in files if rel not in local]
    check_blob_sizes(blobstore, to_fetch, opts.range_size, opts.parallelism)  # before touching the disk
    check_free_space(target, sum(fi.size for _, fi in to_fetch))
    remove_dead_temp_dirs(target)
    tmp = target.parent / f".{target.name}{TMP_INFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    reused = downloaded_bytes = 0
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        for rel_dir in index.dir_index.present_dirs():
            (tmp / rel_dir).mkdir()
        to_download = [DownloadItem(rel, tmp / rel, fi) for rel, fi in to_fetch]
        for rel, fi in files:
            if rel in local:
                _reuse(local[rel], fi, tmp / rel)
                reused += 1
        downloaded_bytes = download_files(blobstore, to_download, parallelism=opts.parallelism,
                                          range_size=opts.range_size, progress=progress)
        fsync_dirs(tmp)  # the files are durable already: downloads and copies fsync their own
        old = swap_into_place(tmp, target)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(target, files) from e
        raise StatectlError(f"restore into {target} failed: {e}") from e
    except DiskFullError as e:
        # Raised deep in a download, naming a file of the temp dir that is gone now: name the target.
        shutil.rmtree(tmp, ignore_errors=True)
        raise _disk_full(target, files) from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # The swap is the commit: from here on the new store is in place, whatever happens to the old one.
    discard_old(old, progress)

    return RestoreResult(
        snapshot_id=snap.index_blob_id,
        checkpoint_id=checkpoint_id,
        target_dir=str(target),
        files_total=len(files),
        files_downloaded=len(files) - reused,
        files_reused=reused,
        bytes_total=sum(fi.size for _, fi in files),
        bytes_downloaded=downloaded_bytes,
        duration_s=round(time.monotonic() - started, 3),
        notes=list(getattr(progress, "notes", [])),
    )


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


def _disk_full(target: Path, files: list[tuple[str, FileIndex]]) -> DiskFullError:
    need = sum(fi.size for _, fi in files)
    return DiskFullError(f"no space left on device restoring into {target}; the old store is untouched",
                         hint=f"the snapshot needs up to {need} bytes free in {target.parent}; free some space, "
                              "or restore elsewhere with --target-dir")


def local_blobstore_root(url: str) -> Path | None:
    """The directory of a ``file://`` blob store, else None."""
    from urllib.parse import unquote, urlparse

    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def resolve_target(path: Path, progress: ProgressReporter | None = None) -> Path:
    """The real path a restore writes to: symlinks (of the target itself or of its parents) are followed,
    so the store is built beside the real directory and swapped in there, and the link keeps pointing
    at it. Raises UsageError for a dangling link or a symlink loop, before anything is written."""
    path = Path(path).absolute()
    try:
        real = path.resolve()
    except (RuntimeError, OSError) as e:  # RuntimeError: a symlink loop (Python 3.11)
        raise UsageError(f"restore target {path} cannot be resolved: {e}") from None
    if os.path.lexists(path) and not path.exists():
        raise UsageError(f"restore target {path} is a symlink to {real}, which does not exist",
                         hint="create the directory it points to, or pass another --target-dir")
    if real != path and progress is not None:
        progress.note(f"{path} is a symlink: restoring into {real}")
    return real


def check_target(target: Path, force: bool, *, blob_root: Path | None = None) -> None:
    """Refuse a target a restore must not replace, before anything is written.

    ``target`` is a resolved path (resolve_target). Refused: a filesystem root; a target inside a RocksDB
    store, or overlapping the ``file://`` blob store at ``blob_root`` (inside it or containing it); a
    target that is not a dir; a store held by a running process (LockHeldError); a non-empty dir that is
    not a store unless ``force``, and even with ``force`` one that holds a RocksDB store or a mount point.
    """
    if target.parent == target:
        raise UsageError(f"refusing to restore into {target}: it is the root of the filesystem")
    if blob_root is not None:
        root = Path(os.path.realpath(blob_root))
        if _within(target, root) or _within(root, target):
            raise UsageError(f"refusing to restore into {target}: it overlaps the blob store at {root}",
                             hint="restore into a dir outside the blob store (--target-dir)")
    for parent in target.parents:
        if is_store(parent):
            raise UsageError(f"refusing to restore into {target}: it is inside the RocksDB store {parent}",
                             hint="pick a --target-dir outside any store")
    if not os.path.lexists(target):
        return
    if not target.is_dir():
        raise UsageError(f"restore target {target} exists and is not a directory")
    if is_store(target):
        try:
            check_not_held(target)
        except LockHeldError as e:  # the hint of backup (--checkpoint-dir) does not apply to a restore
            hint = "stop the job that holds it, or restore elsewhere with --target-dir"
            raise LockHeldError(str(e), hint=hint) from None
        return
    if not any(target.iterdir()):
        return
    if not force:
        raise UsageError(f"restore target {target} is not empty and is not a RocksDB store",
                         hint="pick an empty or new --target-dir, or pass --force to replace it")
    # --force replaces a dir of junk, never other state: walk it (a restore would delete all of it anyway).
    for dirpath, dirnames, _ in os.walk(target):
        for name in dirnames:
            sub = Path(dirpath, name)
            if os.path.ismount(sub):
                raise UsageError(f"refusing to replace {target}: {sub} is a mount point",
                                 hint="pick an empty or new --target-dir")
            if is_store(sub):
                raise UsageError(f"refusing to replace {target}: it holds the RocksDB store {sub}",
                                 hint="pick an empty or new --target-dir, or the store's own dir")


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_blob_sizes(blobstore: BlobStore, files: list[tuple[str, FileIndex]], range_size: int,
                     parallelism: int) -> None:
    """Check that the blobs tile every file as the index says, before anything is written.

    Every file's blob offsets must tile its size (blob_ranges). Blobs the index says are larger than one
    download range are stat'ed, so that a size claim no blob backs (an index saying 10**15 bytes) is a
    CorruptSnapshotError at once, instead of a plan of billions of ranges or a preallocation that fills
    the disk. Smaller blobs are checked as they download (their last range is open-ended).
    """
    big: list[tuple[str, str, int]] = []
    for rel, fi in files:
        for blob_id, _, length in blob_ranges(fi, f"file {rel}"):
            if length > range_size:
                big.append((rel, blob_id, length))

    def task(rel: str, blob_id: str, length: int):
        def run(cancel) -> None:
            if cancel.is_set():
                return
            try:
                size = blobstore.stat(blob_id).size
            except BlobNotFoundError:
                raise CorruptSnapshotError(f"blob {blob_id} of {rel} is missing from {blobstore.url}",
                                           hint="run 'statectl snapshots verify' to list every missing blob") from None
            if size != length:
                raise ChecksumMismatchError(f"blob {blob_id} of {rel} has {size} bytes, the index says {length}",
                                            hint="the snapshot's index or blobs are damaged; restore an older "
                                                 "snapshot with --snapshot")
        return run

    run_parallel([task(*b) for b in big], parallelism)


def _reuse_sources(store_dir: Path, target: Path, checkpoint_id: str) -> list[Path]:
    """Local dirs whose identical files can stand in for downloads, best first: the checkpoint dir
    of this very snapshot, the target and store dirs, then the other local checkpoint dirs."""
    out = [checkpoint_dir(store_dir, checkpoint_id), target, store_dir]
    out += sorted(local_checkpoint_dirs(store_dir).values(), reverse=True)
    seen, uniq = set(), []
    for p in out:
        if p not in seen and p.is_dir():
            seen.add(p)
            uniq.append(p)
    return uniq


def _local_copy(sources: list[Path], rel: str, fi: FileIndex) -> Path | None:
    """The first local file identical to ``fi`` (Samza's same-file rule) among ``sources``, or None."""
    for src_dir in sources:
        src = src_dir / rel
        try:
            st = src.lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat_mod.S_ISREG(st.st_mode) and same_local_file(LocalFile.from_stat(src, st), fi):
            return src
    return None


def _reuse(src: Path, fi: FileIndex, dest: Path) -> None:
    """Hard-link (immutable files: their data is on disk already) or copy and fsync (the rest) ``src``."""
    if fi.file_name.endswith(IMMUTABLE_SUFFIXES):
        try:
            os.link(src, dest)
            return
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
    shutil.copyfile(src, dest)
    fd = os.open(dest, os.O_WRONLY)
    try:
        os.fchmod(fd, fi.file_metadata.mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dirs(root: Path) -> None:
    """fsync every dir under ``root``, children before parents, so that the entries of files made durable
    one by one (and hard links, whose data is already on disk) survive a power cut. Raises OSError."""
    for dirpath, _, _ in os.walk(root, topdown=False):
        _fsync(dirpath)


def fsync_tree(root: Path) -> None:
    """fsync every file, then every dir, under ``root`` (for a tree written by others, e.g. RocksDB), and
    nothing else: a filesystem-wide sync would also flush, and wait for, what other processes wrote."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            _fsync(os.path.join(dirpath, name))
        _fsync(dirpath)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with renameat2(RENAME_EXCHANGE); False where unsupported."""
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
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return old


def discard_old(old: Path | None, progress: ProgressReporter) -> None:
    """Delete the store a swap replaced. Best effort: the swap is done, so a failure here is a note (the
    next restore beside it removes what is left), never a failed restore."""
    if old is None:
        return
    try:
        _remove(old)
    except OSError as e:
        progress.note(f"the replaced store was left at {old}: {e.strerror or e}")


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
            if pid.isdigit() and not _alive(int(pid)):
                try:
                    _remove(p)
                except OSError:
                    pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
