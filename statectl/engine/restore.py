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
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from statectl.blobstore.base import BlobStore
from statectl.engine.checkpoints import BlobCheckpointStore
from statectl.engine.common import finish_interrupted_cleanup, resolve_snapshot
from statectl.engine.layout import StoreRef, checkpoint_dir, local_checkpoint_dirs
from statectl.engine.progress import NullProgress, ProgressReporter
from statectl.engine.transfer import DownloadItem, blob_ranges, download_files
from statectl.errors import DiskFullError, LockHeldError, StatectlError, UsageError
from statectl.rocks.store import check_not_held, is_store
from statectl.snapshot.diff import LocalFile, same_local_file
from statectl.snapshot.model import FileIndex

DEFAULT_RANGE_SIZE = 16 * 1024 * 1024
TMP_INFIX = ".statectl-restore-"
IMMUTABLE_SUFFIXES = (".sst", ".blob")


@dataclass(frozen=True)
class RestoreOptions:
    """What to restore where. ``target_dir`` defaults to the store dir; ``force`` allows replacing a
    non-empty target that is not a RocksDB store."""

    ref: StoreRef
    store_dir: Path
    target_dir: Path | None = None
    snapshot: str | None = None
    parallelism: int = 8
    range_size: int = DEFAULT_RANGE_SIZE
    force: bool = False

    def validate(self) -> None:
        if self.parallelism < 1:
            raise UsageError("--parallelism must be at least 1")
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
    target = Path(opts.target_dir or opts.store_dir).absolute()
    check_target(target, opts.force)

    if finish_interrupted_cleanup(blobstore, checkpoints, opts.ref):
        progress.note(f"finished the interrupted cleanup of the last backup of {opts.ref}")
    snap = resolve_snapshot(blobstore, checkpoints, opts.ref, opts.snapshot)
    index = snap.index
    checkpoint_id = index.snapshot_metadata.checkpoint_id
    files = list(index.dir_index.walk_present())
    for rel, fi in files:
        blob_ranges(fi, f"file {rel}")  # validate every file before touching the disk

    sources = _reuse_sources(opts.store_dir.absolute(), target, checkpoint_id)
    remove_dead_temp_dirs(target)
    tmp = target.parent / f".{target.name}{TMP_INFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    reused = downloaded_bytes = 0
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        for rel_dir in index.dir_index.present_dirs():
            (tmp / rel_dir).mkdir()
        to_download: list[DownloadItem] = []
        for rel, fi in files:
            if _reuse(sources, rel, fi, tmp / rel):
                reused += 1
            else:
                to_download.append(DownloadItem(rel, tmp / rel, fi))
        downloaded_bytes = download_files(blobstore, to_download, parallelism=opts.parallelism,
                                          range_size=opts.range_size, progress=progress)
        fsync_tree(tmp)
        swap_into_place(tmp, target)
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


def _disk_full(target: Path, files: list[tuple[str, FileIndex]]) -> DiskFullError:
    need = sum(fi.size for _, fi in files)
    return DiskFullError(f"no space left on device restoring into {target}; the old store is untouched",
                         hint=f"the snapshot needs up to {need} bytes free in {target.parent}; free some space, "
                              "or restore elsewhere with --target-dir")


def check_target(target: Path, force: bool) -> None:
    if not target.exists():
        return
    if not target.is_dir():
        raise UsageError(f"restore target {target} exists and is not a directory")
    if is_store(target):
        try:
            check_not_held(target)
        except LockHeldError as e:  # the hint of backup (--checkpoint-dir) does not apply to a restore
            hint = "stop the job that holds it, or restore elsewhere with --target-dir"
            raise LockHeldError(str(e), hint=hint) from None
    elif any(target.iterdir()) and not force:
        raise UsageError(f"restore target {target} is not empty and is not a RocksDB store",
                         hint="pick an empty or new --target-dir, or pass --force to replace it")


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


def _reuse(sources: list[Path], rel: str, fi: FileIndex, dest: Path) -> bool:
    """Hard-link (immutable files) or copy (the rest) an identical local file into ``dest``."""
    for src_dir in sources:
        src = src_dir / rel
        try:
            st = src.lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        import stat as stat_mod

        if not stat_mod.S_ISREG(st.st_mode):
            continue
        if not same_local_file(LocalFile.from_stat(src, st), fi):
            continue
        if fi.file_name.endswith(IMMUTABLE_SUFFIXES):
            try:
                os.link(src, dest)
                return True
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise
        shutil.copyfile(src, dest)
        os.chmod(dest, fi.file_metadata.mode)
        return True
    return False



def fsync_tree(root: Path) -> None:
    """Make every file and dir under ``root`` durable before it is swapped into place.

    One syncfs(2) of the filesystem flushes all of them at once, after the downloads, instead of an
    fsync per file that would stall a download slot each time; where syncfs is missing, every file and
    dir is fsynced. Raises OSError (e.g. EIO, ENOSPC) if the data cannot be written.
    """
    fd = os.open(root, os.O_RDONLY)
    try:
        if _syncfs(fd):
            return
    finally:
        os.close(fd)
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(dirpath, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _syncfs(fd: int) -> bool:
    """syncfs(2) on the filesystem holding ``fd``; False where the call does not exist."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return False
    if fn(fd) != 0:
        err = ctypes.get_errno()
        if err == errno.ENOSYS:
            return False
        raise OSError(err, os.strerror(err))
    return True


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


def swap_into_place(tmp: Path, target: Path) -> None:
    """Put the complete new store at ``target``; delete the old one only after."""
    if not target.exists():
        os.rename(tmp, target)
    elif _exchange(tmp, target):
        shutil.rmtree(tmp)  # tmp now holds the old store
    else:
        old = target.parent / f".{target.name}.statectl-old-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_dead_temp_dirs(target: Path) -> None:
    """Remove temp dirs left by restores that crashed (their pid is gone)."""
    prefix = f".{target.name}{TMP_INFIX}"
    if not target.parent.is_dir():
        return
    for p in target.parent.iterdir():
        if not p.name.startswith(prefix):
            continue
        pid = p.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
