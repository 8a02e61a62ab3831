"""RocksDB stores on disk: is this dir a store, who holds it, and hard-link checkpoints of it.

rocksdict is imported inside functions so that ``statectl --help`` stays fast.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from pathlib import Path

from statectl.errors import LockHeldError, MissingDependencyError, NotAStoreError, NotFoundError, StatectlError
from statectl.fsutil import chown_tree, owner_of

ROCKSDICT_CONFIG = "rocksdict-config.json"


def is_store(path: Path) -> bool:
    """True when ``path`` looks like a RocksDB store dir (a CURRENT file naming a MANIFEST)."""
    current = path / "CURRENT"
    try:
        manifest = current.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return False
    return manifest.startswith("MANIFEST-") and (path / manifest).is_file()


def require_store(path: Path, what: str = "store dir") -> None:
    """Raise NotFoundError if ``path`` does not exist, NotAStoreError if it is not a RocksDB store."""
    if not path.exists():
        raise NotFoundError(f"{what} {path} does not exist",
                            hint="check --state-dir, --store and --task (the store dir is <state-dir>/<store>/<task>)"
                            if what == "store dir" else None)
    if not path.is_dir() or not is_store(path):
        raise NotAStoreError(f"{path} is not a RocksDB store (no CURRENT/MANIFEST)",
                             hint="point --store-dir (or --state-dir/--store/--task) at the store's directory")


def lock_holder(path: Path) -> int | None:
    """The pid of another process holding the store's LOCK (-1 if the holder is unknown), else None.

    Uses F_GETLK, which only tests the lock: it never takes it, so a running job is not disturbed.
    """
    lock = path / "LOCK"
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        # struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
        req = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        res = fcntl.fcntl(fd, fcntl.F_GETLK, req)
        l_type, _, _, _, pid = struct.unpack("hhqqi4x", res)
        if l_type == fcntl.F_UNLCK:
            return None
        return pid if pid > 0 else -1
    finally:
        os.close(fd)


def locked_error(path: Path, pid: int | None) -> LockHeldError:
    who = f"process {pid}" if pid and pid > 0 else "another process"
    return LockHeldError(
        f"store {path} is held open by {who} (its RocksDB LOCK is taken)",
        hint="back up a checkpoint dir the job made with --checkpoint-dir, or stop the job first",
    )


def check_not_held(path: Path) -> None:
    """Raise LockHeldError when another process holds the store's LOCK."""
    pid = lock_holder(path)
    if pid is not None:
        raise locked_error(path, pid)


def rocksdict_module():
    try:
        import rocksdict
    except ImportError as e:  # pragma: no cover - rocksdict is a dependency
        raise MissingDependencyError("rocksdict is not installed", hint="pip install rocksdict") from e
    return rocksdict


def _options(rd):
    """Options for opening a store only to checkpoint or read it: few open files, so that memory does not
    grow with the number of SST files (each open table keeps its index and filter blocks in memory)."""
    opts = rd.Options(raw_mode=True)
    opts.set_max_open_files(16)
    return opts


def _column_families(rd, path: Path) -> dict:
    try:
        _, cfs = rd.Options.load_latest(str(path))
    except Exception:
        return {}
    return {name: _options(rd) for name in cfs if name != "default"}


def create_checkpoint(store_dir: Path, checkpoint_dir: Path) -> None:
    """Make a RocksDB checkpoint of ``store_dir`` in ``checkpoint_dir`` (which must not exist).

    The store is opened read-write (taking its LOCK, so no one else opens it meanwhile), flushed,
    checkpointed (SST files hard-linked, metadata copied) and closed. Run as root, what the open and the
    checkpoint made (a new MANIFEST, OPTIONS, CURRENT, logs, a flushed SST; the checkpoint's copies) is
    then given to the owner of ``store_dir`` (fsutil.chown_tree): the job's user, who must write the store
    and whose restore compares the checkpoint's owners with its snapshot's. Raises LockHeldError when the
    store is held by another process; NotAStoreError when it is not a store.
    """
    require_store(store_dir)
    check_not_held(store_dir)
    rd = rocksdict_module()
    had_config = (store_dir / ROCKSDICT_CONFIG).exists()
    try:
        db = rd.Rdict(str(store_dir), _options(rd), column_families=_column_families(rd, store_dir) or None)
    except Exception as e:
        msg = str(e)
        if "lock" in msg.lower():
            raise locked_error(store_dir, lock_holder(store_dir)) from e
        raise StatectlError(f"cannot open RocksDB store {store_dir}: {msg.splitlines()[0]}") from e
    try:
        db.flush()
        rd.Checkpoint(db).create_checkpoint(str(checkpoint_dir))
    except Exception as e:
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            raise
        raise StatectlError(f"cannot checkpoint store {store_dir}: {str(e).splitlines()[0]}") from e
    finally:
        db.close()
        if not had_config:
            # rocksdict drops its own config file into every dir it opens; a Samza store has none.
            (store_dir / ROCKSDICT_CONFIG).unlink(missing_ok=True)
            (checkpoint_dir / ROCKSDICT_CONFIG).unlink(missing_ok=True)
    owner = owner_of(store_dir)
    chown_tree(store_dir, owner)
    chown_tree(checkpoint_dir, owner)


def open_readonly(store_dir: Path):
    """Open a store read-only (never takes its LOCK) for key iteration; caller closes it."""
    rd = rocksdict_module()
    return rd.Rdict(str(store_dir), _options(rd), access_type=rd.AccessType.read_only(),
                    column_families=_column_families(rd, store_dir) or None)
