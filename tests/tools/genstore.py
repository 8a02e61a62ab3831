"""Generate RocksDB stores of random data, and fingerprint a store's contents (tests, demo, bench).

    python -m tests.tools.genstore PATH --keys 100000 --value-size 1024 [--seed 1] [--sst-mb 64]
    python -m tests.tools.genstore --fingerprint PATH
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator


def make_store(path: str | os.PathLike[str], keys: int, value_size: int = 1024, *, seed: int = 1, start: int = 0,
               sst_mb: int = 64, batch: int = 2000) -> None:
    """Write ``keys`` random values of ``value_size`` bytes (keys ``k%012d`` from ``start``) into the store
    at ``path`` (created if missing), flushed so the data sits in SST files of about ``sst_mb`` MiB."""
    from rocksdict import Options, Rdict, WriteBatch

    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_write_buffer_size(sst_mb * 1024 * 1024)
    opts.set_target_file_size_base(sst_mb * 1024 * 1024)
    opts.set_max_bytes_for_level_base(4 * sst_mb * 1024 * 1024)
    db = Rdict(str(path), opts)
    rng = random.Random(seed)
    try:
        wb = WriteBatch(raw_mode=True)
        for i in range(start, start + keys):
            wb.put(b"k%012d" % i, rng.randbytes(value_size))
            if (i - start + 1) % batch == 0:
                db.write(wb)
                wb = WriteBatch(raw_mode=True)
        db.write(wb)
        db.flush()
    finally:
        db.close()


@contextlib.contextmanager
def _secondary(path: str | os.PathLike[str]) -> Iterator[Any]:
    """The store at ``path`` opened as a RocksDB secondary instance, so the store itself is not touched (not
    even rocksdict's config file, which it (re)writes into any dir it opens: put back as it was after)."""
    from rocksdict import AccessType, Options, Rdict

    config = Path(path) / "rocksdict-config.json"
    saved = (config.read_bytes(), config.stat()) if config.exists() else None
    with tempfile.TemporaryDirectory() as sec:
        db = Rdict(str(path), Options(raw_mode=True), access_type=AccessType.secondary(sec))
        try:
            db.try_catch_up_with_primary()
            yield db
        finally:
            db.close()
            if saved is None:
                config.unlink(missing_ok=True)
            else:
                config.write_bytes(saved[0])
                os.utime(config, ns=(saved[1].st_atime_ns, saved[1].st_mtime_ns))


def fingerprint(path: str | os.PathLike[str]) -> tuple[int, str]:
    """(number of keys, sha256 over every key and value in order) of a store, read without touching it."""
    with _secondary(path) as db:
        h = hashlib.sha256()
        n = 0
        for k, v in db.items():
            h.update(len(k).to_bytes(4, "big") + k + len(v).to_bytes(4, "big") + v)
            n += 1
    return n, h.hexdigest()


def dump_store(path: str | os.PathLike[str]) -> dict[bytes, bytes]:
    """Every key and value of a store, read without touching it (for small test stores)."""
    with _secondary(path) as db:
        return dict(db.items())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="genstore")
    p.add_argument("path")
    p.add_argument("--keys", type=int, default=10000)
    p.add_argument("--value-size", type=int, default=1024)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--sst-mb", type=int, default=64)
    p.add_argument("--fingerprint", action="store_true", help="print the key count and content hash instead")
    a = p.parse_args(argv)
    if a.fingerprint:
        n, h = fingerprint(a.path)
        print(f"{n} {h}")
        return 0
    Path(a.path).parent.mkdir(parents=True, exist_ok=True)
    make_store(a.path, a.keys, a.value_size, seed=a.seed, start=a.start, sst_mb=a.sst_mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
