"""A RocksDB store a running task holds open read-write, and checkpoints while it runs (as a Samza
container does before each commit: a hard-link checkpoint in ``<storeDir>-<checkpointId>``)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

from statectl.errors import StatectlError
from statectl.rocks.store import ROCKSDICT_CONFIG, rocksdict_module, lock_holder, locked_error


class LiveStore:
    """The store at ``path``, created if missing, opened read-write (raw bytes keys and values; its LOCK
    is held until :meth:`close`); ``max_open_files`` as RocksDB's option. ``db`` is the rocksdict.Rdict,
    written with ``write_options``. Raises LockHeldError when another process holds it; StatectlError when
    it cannot be opened.

    ``wal`` False: written without a WAL, for a writer that records its position after a flush (a standby
    replica): a write is durable once flushed, and the position recorded after the flush covers it; a kill
    loses only writes that no recorded position names, and the WAL would write every record twice. (The
    memtable stays RocksDB's default: rocksdict opens a store with the column family options its OPTIONS
    file names, so any other would be forced on every later reader of the store.)
    """

    def __init__(self, path: Path, *, max_open_files: int = -1, wal: bool = True):
        rd = rocksdict_module()
        self.path = Path(path)
        self._rd = rd
        self.write_options = rd.WriteOptions()
        self.write_options.disable_wal = not wal
        options = rd.Options(raw_mode=True)
        options.create_if_missing(True)
        # -1 (RocksDB's default) opens every table file at open; a writer that reads little (a standby)
        # passes a small number so that opening does not take longer as the store grows.
        options.set_max_open_files(max_open_files)
        self._had_config = (self.path / ROCKSDICT_CONFIG).exists()
        try:
            self.db: Any = rd.Rdict(str(self.path), options)
        except Exception as e:
            if "lock" in str(e).lower():
                raise locked_error(self.path, lock_holder(self.path)) from e
            raise StatectlError(f"cannot open RocksDB store {self.path}: {str(e).splitlines()[0]}") from e

    def checkpoint(self, dest: Path) -> None:
        """Flush the memtables and make a checkpoint of the store in ``dest`` (which must not exist).
        Raises OSError(ENOSPC) when the disk is full, StatectlError otherwise."""
        try:
            self.db.flush()
            self._rd.Checkpoint(self.db).create_checkpoint(str(dest))
        except Exception as e:
            if isinstance(e, OSError) and e.errno == errno.ENOSPC:
                raise
            raise StatectlError(f"cannot checkpoint store {self.path}: {str(e).splitlines()[0]}") from e
        (Path(dest) / ROCKSDICT_CONFIG).unlink(missing_ok=True)

    def close(self) -> None:
        """Flush and close; idempotent. Removes the config file rocksdict drops (a Samza store has none)."""
        db, self.db = self.db, None
        if db is None:
            return
        try:
            db.flush()
        finally:
            db.close()
            if not self._had_config:
                (self.path / ROCKSDICT_CONFIG).unlink(missing_ok=True)
