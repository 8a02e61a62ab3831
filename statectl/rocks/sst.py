"""SST files: written outside any store (rocksdict's SstFileWriter), ingested into a new store, and the
digest of a store's content.

The Spark bulk path of ``adstore load`` writes SST files in its executors (statectl.spark) and ingests them
here; the put path's store is checked with :func:`scan_digest`. Both give the same
:class:`~statectl.formats.adstore.Digest` for the same entries, whatever the files they are split into.

rocksdict is imported inside functions so that ``statectl --help`` stays fast.
"""

from __future__ import annotations

import errno
import operator
import os
import shutil
from collections import deque
from itertools import repeat
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from statectl.errors import StatectlError
from statectl.fsutil import fsync_file
from statectl.formats.adstore import Digest
from statectl.rocks.store import ROCKSDICT_CONFIG, rocksdict_module, open_readonly
from statectl.rocks.writer import store_error


def write_sst(path: Path, entries: Iterable[tuple[bytes, bytes]]) -> Digest:
    """Write ``entries`` (keys strictly ascending by their bytes, values bytes) into a new SST file at
    ``path``, replacing any file there, and return the Digest of what it holds.

    An empty ``entries`` writes no file (RocksDB cannot finish an empty SST) and returns an empty Digest.
    Raises ValueError for a key that is not above the one before it, TypeError for a key or value that is
    not bytes, and then leaves no file; OSError(ENOSPC) for a full disk; StatectlError naming the file otherwise.
    """
    rd = rocksdict_module()
    path = Path(path)
    digest = Digest()
    it = iter(entries)
    first = next(it, None)
    if first is None:
        return digest
    writer = rd.SstFileWriter(rd.Options(raw_mode=True))
    done = False
    try:
        try:
            writer.open(str(path))
        except Exception as e:
            raise store_error(path, "SST open", e) from e
        prev: bytes | None = None
        entry: tuple[bytes, bytes] | None = first
        batch: list[tuple[bytes, bytes]] = []
        while entry is not None:
            key, value = entry
            if not isinstance(key, bytes) or not isinstance(value, bytes):
                raise TypeError(f"SST entries must be (bytes, bytes), got ({type(key).__name__}, "
                                f"{type(value).__name__})")
            if prev is not None and key <= prev:
                raise ValueError(f"SST keys must be strictly ascending: {key[:64]!r} after {prev[:64]!r}")
            try:
                writer[key] = value
            except Exception as e:
                raise store_error(path, "SST write", e) from e
            batch.append(entry)
            if len(batch) >= 4096:
                digest.add_sorted(batch)
                batch = []
            prev = key
            entry = next(it, None)
        digest.add_sorted(batch)
        try:
            writer.finish()
        except Exception as e:
            raise store_error(path, "SST finish", e) from e
        done = True
    finally:
        if not done:
            del writer  # closes the file before it is removed
            path.unlink(missing_ok=True)
    return digest


class SstWriter:
    """One new SST file at ``path`` (replacing any file there) written from columns of entries: each
    :meth:`add` gives a list of keys and a list of their values, keys strictly ascending by their bytes
    across every add. The same file and Digest as :func:`write_sst` of the same entries, without a Python
    loop per entry (the bulk writer of the Spark path's Arrow batches).

    :meth:`finish` (after at least one entry: RocksDB cannot finish an empty SST) closes the file and
    returns its Digest; :meth:`abort` removes it. :meth:`add` raises ValueError for a key that is not above
    the one before it (RocksDB's writer refuses it), TypeError for a key or value that is not bytes, and
    StatectlError naming the file otherwise; the file is then unfinished and the caller aborts it.
    """

    def __init__(self, path: Path):
        rd = rocksdict_module()
        self.path = Path(path)
        self.digest = Digest()
        self._writer: Any = rd.SstFileWriter(rd.Options(raw_mode=True))
        try:
            self._writer.open(str(self.path))
        except Exception as e:
            raise store_error(self.path, "SST open", e) from e

    def add(self, keys: Sequence[bytes], values: Sequence[bytes], checksum: int | None = None) -> None:
        """Append the entries; ``checksum``: the sum of their entry_digest (mod 2**64) when the caller has
        it (the Spark path computes the CRCs in the JVM), else it is computed here."""
        if not keys:
            return
        try:
            deque(map(operator.setitem, repeat(self._writer), keys, values), maxlen=0)  # no method-wrapper per entry
        except Exception as e:
            if "ascending order" in str(e):
                raise ValueError(f"SST keys must be strictly ascending ({self.path.name})") from None
            bad = next((x for x in (*keys, *values) if not isinstance(x, bytes)), b"")
            if not isinstance(bad, bytes):  # rocksdict's raw mode refuses it (KeyError or ValueError)
                raise TypeError(f"SST entries must be bytes, got {type(bad).__name__}") from None
            raise store_error(self.path, "SST write", e) from e
        if checksum is None:
            self.digest.add_sorted_columns(keys, values)
        else:
            self.digest.merge(Digest(len(keys), keys[0], keys[-1], checksum))

    def finish(self) -> Digest:
        try:
            self._writer.finish()
        except Exception as e:
            raise store_error(self.path, "SST finish", e) from e
        return self.digest

    def abort(self) -> None:
        """Close and remove the unfinished file. Idempotent."""
        self._writer = None  # closes the file before it is removed
        self.path.unlink(missing_ok=True)


def create_store(store_path: Path) -> Any:
    """An empty RocksDB store created at ``store_path`` (which must not exist, or be an empty dir), open: for
    :func:`ingest_into_new_store` to ingest into, made ahead of its files (its creation syncs a handful of
    files and dirs). Raises StatectlError naming the store when ``store_path`` holds something or RocksDB
    refuses; the caller closes it (ingest_into_new_store does)."""
    rd = rocksdict_module()
    store_path = Path(store_path)
    if store_path.exists() and (not store_path.is_dir() or any(store_path.iterdir())):
        raise StatectlError(f"cannot ingest into {store_path}: it exists and is not an empty dir")
    store_path.parent.mkdir(parents=True, exist_ok=True)
    options = rd.Options(raw_mode=True)
    options.create_if_missing(True)
    try:
        return rd.Rdict(str(store_path), options)
    except Exception as e:
        raise store_error(store_path, "create", e) from e


def ingest_into_new_store(store_path: Path, files: list[Path], db: Any = None) -> None:
    """Create a RocksDB store at ``store_path`` (which must not exist, or be an empty dir; ``db``: the store
    :func:`create_store` made there, still empty) holding the entries of the SST ``files`` (as :func:`write_sst`
    made them; no key in two of them: files whose key ranges overlap go to L0 at sequence numbers of their
    own), flushed and closed (``db`` too, whatever happens).

    The files are hard-linked into a sibling dir and the links ingested with ``move_files``, so the files
    themselves stay: an ingest interrupted at any point is re-run by removing ``store_path`` and calling
    this again. (Files on another filesystem are copied instead.) Raises StatectlError naming the store
    when ``store_path`` holds something, a file is missing, or RocksDB refuses (a file that is not an SST,
    overlapping files); OSError(ENOSPC) for a full disk.
    """
    rd = rocksdict_module()
    store_path = Path(store_path)
    try:
        missing = [str(f) for f in files if not Path(f).is_file()]
        if missing:
            raise StatectlError(f"cannot ingest into {store_path}: no SST file {missing[0]}"
                                + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
        for f in files:  # RocksDB syncs each file it ingests holding the GIL: clean, that takes no time
            fsync_file(f)
        links = store_path.parent / f".{store_path.name}.ingest-{os.getpid()}"
        shutil.rmtree(links, ignore_errors=True)
        store_path.parent.mkdir(parents=True, exist_ok=True)
        links.mkdir()
        try:
            linked, copy = _link(files, links)
            db = db if db is not None else create_store(store_path)
            if linked:
                ingest = rd.IngestExternalFileOptions()
                ingest.set_move_files(not copy)
                try:
                    db.ingest_external_file(linked, ingest)
                except Exception as e:
                    raise store_error(store_path, "ingest", e) from e
            try:
                db.flush()
            except Exception as e:
                raise store_error(store_path, "flush", e) from e
        finally:
            shutil.rmtree(links, ignore_errors=True)
    finally:
        if db is not None:
            db.close()
            (store_path / ROCKSDICT_CONFIG).unlink(missing_ok=True)


def _link(files: list[Path], links: Path) -> tuple[list[str], bool]:
    """``files`` hard-linked into ``links`` (000000.sst...), or, on another filesystem, named as they are (RocksDB
    copies them itself): the paths to ingest, and whether any is to be copied."""
    linked: list[str] = []
    copy = False
    for i, f in enumerate(files):
        target = links / f"{i:06d}.sst"
        try:
            os.link(f, target)
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
            copy = True
            target = Path(f)
        linked.append(str(target))
    return linked, copy


def scan_digest(store_path: Path) -> Digest:
    """The Digest of every entry of the store at ``store_path`` (raw bytes, default column family), read
    on a read-only open (its LOCK is not taken). Raises StatectlError naming the store when it cannot be
    opened or read."""
    store_path = Path(store_path)
    had_config = (store_path / ROCKSDICT_CONFIG).exists()
    try:
        db = open_readonly(store_path)
    except Exception as e:
        raise store_error(store_path, "open", e) from e
    digest = Digest()
    try:
        cursor = db.iter()
        cursor.seek_to_first()
        digest.add_sorted(_items(cursor))
        try:
            cursor.status()
        except Exception as e:
            raise store_error(store_path, "read", e) from e
        del cursor  # before the store closes
    finally:
        db.close()
        if not had_config:
            (store_path / ROCKSDICT_CONFIG).unlink(missing_ok=True)
    return digest


def _items(cursor: Any) -> Iterator[tuple[bytes, bytes]]:
    while cursor.valid():
        yield cursor.key(), cursor.value()
        cursor.next()
