"""Filling a new RocksDB store through WriteBatches (a changelog replay, a bulk load).

rocksdict is imported inside functions so that ``statectl --help`` stays fast.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any, Iterable

from statectl import failpoints
from statectl.errors import StatectlError
from statectl.rocks.store import ROCKSDICT_CONFIG, rocksdict_module


class StoreWriter:
    """A RocksDB store created at ``path`` (which must not hold one), written in batches without a WAL:
    nothing is durable until :meth:`close` has flushed the memtables into SST files.

    Errors raise StatectlError naming the store, or OSError(ENOSPC) when the disk is full.
    """

    def __init__(self, path: Path):
        rd = rocksdict_module()
        self.path = Path(path)
        self._rd = rd
        options = rd.Options(raw_mode=True)
        options.create_if_missing(True)
        self._write_opts = rd.WriteOptions()
        self._write_opts.disable_wal = True
        try:
            self._db: Any = rd.Rdict(str(self.path), options)
        except Exception as e:
            raise store_error(self.path, "create", e) from e

    def apply(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Write ``(key, value)`` pairs as one atomic batch, in order; a None value deletes the key."""
        failpoints.hit("changelog-apply")
        wb = self._rd.WriteBatch(raw_mode=True)
        for key, value in entries:
            if value is None:
                wb.delete(key)
            else:
                wb.put(key, value)
        try:
            self._db.write(wb, self._write_opts)
        except Exception as e:
            raise store_error(self.path, "write", e) from e

    def close(self, *, flush: bool = True) -> None:
        """Flush (unless ``flush`` is False, when the store is being thrown away) and close. Idempotent.

        Removes the config file rocksdict drops into every dir it opens: a Samza store has none.
        """
        db, self._db = self._db, None
        if db is None:
            return
        try:
            if flush:
                db.flush()
        except Exception as e:
            raise store_error(self.path, "flush", e) from e
        finally:
            db.close()
            (self.path / ROCKSDICT_CONFIG).unlink(missing_ok=True)


def store_error(path: Path, what: str, e: Exception) -> Exception:
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    if "no space left" in msg.lower():
        return OSError(errno.ENOSPC, f"RocksDB {what} in {path}: {msg}")
    return StatectlError(f"RocksDB {what} in {path} failed: {msg}")
