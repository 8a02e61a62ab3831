"""rocksdict's probe for ``statectl doctor``: it imports, and opens, writes, reads back and closes a store."""

from __future__ import annotations

import os
import shutil
import tempfile

from statectl.probe import FAIL, OK, Check, dist_version

ROCKSDICT = "rocksdict"
NAMES = (ROCKSDICT,)


def probe() -> list[Check]:
    """The ``rocksdict`` check, as a one-item list: rocksdict imports, and a store in a temporary dir can be
    opened, written, reopened read-only and read back. Never raises; the temporary dir is removed."""
    return [_check()]


def _check() -> Check:
    try:
        import rocksdict
    except Exception as e:
        return Check(ROCKSDICT, FAIL, f"rocksdict does not import: {type(e).__name__}: {e}", "pip install rocksdict")
    version = dist_version("rocksdict")
    tmp = tempfile.mkdtemp(prefix="statectl-doctor-")
    step = "opening a store"
    try:
        path = os.path.join(tmp, "store")
        db = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
        try:
            step = "writing to it"
            db[b"statectl-doctor"] = b"ok"
            db.flush()
        finally:
            db.close()
        step = "reopening it read-only"
        db = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True), access_type=rocksdict.AccessType.read_only())
        try:
            step = "reading it back"
            value = db.get(b"statectl-doctor")
        finally:
            db.close()
        if value != b"ok":
            return Check(ROCKSDICT, FAIL, f"rocksdict {version}: a value written to a store read back as {value!r}")
    except Exception as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        return Check(ROCKSDICT, FAIL, f"rocksdict {version}: {step} in {tmp} failed: {reason}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Check(ROCKSDICT, OK, f"rocksdict {version}: opened, wrote, read back and closed a store")


def rocksdb_version() -> str | None:
    """The version of the RocksDB library rocksdict is built with, or None when rocksdict is not usable.
    rocksdict does not export it; RocksDB writes it into every store's OPTIONS file (``rocksdb_version=``),
    so a store is made in a temporary dir (about 50 ms) and the file read. Never raises."""
    tmp = tempfile.mkdtemp(prefix="statectl-version-")
    try:
        import rocksdict

        path = os.path.join(tmp, "store")
        rocksdict.Rdict(path, rocksdict.Options(raw_mode=True)).close()
        for name in sorted(os.listdir(path)):
            if name.startswith("OPTIONS-"):
                with open(os.path.join(path, name), encoding="utf-8", errors="replace") as f:
                    for line in f:
                        key, _, value = line.strip().partition("=")
                        if key == "rocksdb_version":
                            return value
        return None
    except Exception:
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
