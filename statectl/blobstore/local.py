"""The embedded ``file://`` blob store: one file per object under a root directory.

Writes go to a temporary file in the same directory, are fsynced, then renamed into place, so a
reader never sees a partial object. A TTL lives in a sidecar ``<key>.ttl`` holding the expiry epoch
second; ``remove_ttl`` deletes the sidecar.

A blob's file is never written again once its name appears (every write is a new file renamed into
place), so a copy with a TTL is a hard link to the source's file: a copy for every reader and deleter
(deleting either name leaves the other's bytes), made in microseconds. A link shares its source's
modification time, so a blob's age (``BlobInfo.modified_at``, which gc's grace reads) is the later of
its file's and its TTL sidecar's: the sidecar is written as the key is made.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from stat import S_ISREG
from typing import BinaryIO, Iterable, Iterator, Literal

from statectl.blobstore.base import STATECTL_PREFIXES, BlobInfo, BlobStore, innermost, key_batches, new_blob_key
from statectl.fsutil import fsync_dir
from statectl.errors import (
    BlobNotFoundError,
    BlobStoreError,
    BlobStoreMissingError,
    DiskFullError,
    PreconditionFailedError,
    UsageError,
    command,
)

TTL_SUFFIX = ".ttl"
LOCK_SUFFIX = ".lock"
TMP_MARK = ".tmp-"
COPY_BUF = 1024 * 1024
# Errors that mean "no object under this key": a path through a file, or a directory (a key prefix).
_MISSING = (FileNotFoundError, NotADirectoryError, IsADirectoryError)
# Where the filesystem or the OS refuses a hard link (another filesystem, a file not ours under
# protected_hardlinks, the inode's link limit, no links at all): the copy is a byte copy instead.
_NO_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOSYS)


class LocalBlobStore:
    """BlobStore on a local (or mounted) filesystem.

    ``root`` is the real path of the store's dir (symlinks and ``..`` resolved as the OS does), for
    checks that nothing else overlaps it. Raises UsageError for a root that resolves to ``/``.
    """

    # No request limit here (one unlink a key): only the size of the batches callers hand out in parallel.
    delete_batch = 512
    mtime_grain_s = 0.0  # st_mtime: nanoseconds
    # Any two file:// stores of this host copy each other's files without a client in between.
    copy_domain: tuple[str, ...] = ("file",)

    def __init__(self, root: str | os.PathLike[str], url: str | None = None, *,
                 create: bool | Literal["on-write"] = True):
        self.root = Path(os.path.realpath(root))
        if self.root == Path("/"):
            raise UsageError(f"file: the filesystem root cannot be a blob store ({os.fspath(root)} resolves to /)")
        self.url = url or f"file://{self.root}"
        # Without ``create`` the dir must exist: checked on first use (as a missing bucket shows), so that
        # a command's usage errors come first. A mistyped URL must not start a new blob store where nobody
        # looks (restic separates init). ``create="on-write"``: a dir that is not there reads as an empty
        # blob store and is made by the first write (a write makes its parents): a dry run leaves none.
        self._check_root = not create
        if create is True:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise BlobStoreError(f"file: cannot create blob store dir {self.root}: {e.strerror}") from e

    @property
    def identity(self) -> tuple[str, ...]:
        """("file", the real path of the dir): every spelling of it (``/./``, ``..``, a symlink) is one store."""
        return ("file", str(self.root))

    def _require_root(self) -> None:
        """BlobStoreMissingError (exit 10) when the store was opened without ``create`` and its dir is not there."""
        if self._check_root:
            if not self.root.is_dir():
                what = "is not a directory" if self.root.exists() else "does not exist"
                raise BlobStoreMissingError(f"blob store {self.url} {what}", url=self.url,
                                    hint=("check --blobstore; to start a new blob store there, run ",
                                          command("backup", "--create"), " (or create the dir)"))
            self._check_root = False

    def _path(self, key: str) -> Path:
        self._require_root()
        parts = key.split("/")
        if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in key:
            raise UsageError(f"file: invalid blob key {key!r}")
        # Names the store uses for its own files: such a key would read as a TTL or be hidden from list.
        if parts[-1].endswith((TTL_SUFFIX, LOCK_SUFFIX)) or parts[-1].startswith(TMP_MARK):
            raise UsageError(f"file: invalid blob key {key!r}: {TTL_SUFFIX!r}, {LOCK_SUFFIX!r} and {TMP_MARK!r} "
                             "names are reserved")
        return self.root.joinpath(*parts)

    @staticmethod
    def _ttl_path(path: Path) -> Path:
        return path.with_name(path.name + TTL_SUFFIX)

    def _write_atomic(self, path: Path, write, *, durable: bool = True) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # e.g. a parent "dir" is an object already
            raise BlobStoreError(f"file: write {path}: cannot create {path.parent}: {e.strerror or e}") from e
        tmp = path.parent / f"{TMP_MARK}{path.name}.{uuid.uuid4().hex[:8]}"
        try:
            with open(tmp, "wb") as f:
                write(f)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path)
            if durable:
                fsync_dir(path.parent)
        except BaseException as e:
            tmp.unlink(missing_ok=True)
            if isinstance(e, OSError):
                if e.errno == errno.ENOSPC:
                    raise DiskFullError(f"file: no space left writing {path}") from e
                raise BlobStoreError(f"file: write {path}: {e.strerror or e}") from e
            raise

    def put(self, src: BinaryIO, *, size: int, ttl_seconds: int | None) -> str:
        key = new_blob_key()
        path = self._path(key)

        def write(f: BinaryIO) -> None:
            remaining = size
            while remaining:
                chunk = src.read(min(COPY_BUF, remaining))
                if not chunk:
                    raise BlobStoreError(f"file: source ended {remaining} bytes early writing {key}")
                f.write(chunk)
                remaining -= len(chunk)

        # The TTL goes first: a crash in between leaves a stray sidecar, never a blob without its TTL.
        if ttl_seconds is not None:
            self._write_ttl(path, ttl_seconds)
        try:
            self._write_atomic(path, write)
        except BaseException:
            self._ttl_path(path).unlink(missing_ok=True)
            raise
        return key

    def _write_ttl(self, path: Path, ttl_seconds: int) -> None:
        expiry = str(int(time.time()) + ttl_seconds).encode()
        # Not fsynced (half the fsyncs of a small blob): the blob's own directory fsync, which follows,
        # makes the sidecar's name durable with it; if a crash loses its bytes, an empty sidecar reads as
        # expired, and a missing one leaves an unreferenced blob. gc reclaims either once no snapshot
        # references the blob, which is all a TTL is for; it never deletes a referenced blob for a TTL.
        self._write_atomic(self._ttl_path(path), lambda f: f.write(expiry), durable=False)

    def put_at(self, key: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False,
               durable: bool = True) -> str:
        path = self._path(key)

        def write() -> None:
            # Like an S3 overwrite, the new object has no TTL even if the old one had.
            try:
                self._ttl_path(path).unlink(missing_ok=True)
            except OSError as e:
                raise BlobStoreError(f"file: put {key}: {e.strerror or e}") from e
            self._write_atomic(path, lambda f: f.write(data), durable=durable)

        if if_match is None and not if_none_match:
            write()
            return _etag(data)
        with self._locked(path):
            try:
                current: str | None = _etag(path.read_bytes())
            except _MISSING:
                current = None
            if (if_none_match and current is not None) or (if_match is not None and current != if_match):
                raise PreconditionFailedError(f"file: put {key}: the object changed since it was read")
            write()
        return _etag(data)

    @contextmanager
    def _locked(self, path: Path):
        """An exclusive flock on ``<path>.lock``: conditional writes are read-compare-write under it."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path.with_name(path.name + LOCK_SUFFIX), os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as e:
            raise BlobStoreError(f"file: lock {path}: {e.strerror or e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def check_writable(self, key: str) -> None:
        path = self._path(key)
        where = path.parent
        while not where.exists() and where != where.parent:  # what a write makes, it makes in here
            where = where.parent
        if not where.is_dir():
            raise BlobStoreError(f"file: write {path}: cannot create {path.parent}: {where} is not a directory")
        if not os.access(where, os.W_OK | os.X_OK):
            why = "a read-only file system" if _read_only_mount(where) else "permission denied"
            raise BlobStoreError(f"file: write {path}: cannot write to {where} ({why})")

    def read_at(self, key: str) -> tuple[bytes, str]:
        path = self._path(key)
        try:
            data = path.read_bytes()
        except _MISSING:
            raise BlobNotFoundError(f"file: blob {key} not found") from None
        except OSError as e:
            raise BlobStoreError(f"file: get {key}: {e.strerror or e}") from e
        return data, _etag(data)

    def get(self, key: str, dst: BinaryIO, *, start: int = 0, length: int | None = None) -> int:
        if start < 0 or (length is not None and length < 0):
            raise UsageError(f"file: get {key}: negative start or length ({start}, {length})")
        path = self._path(key)
        try:
            f = open(path, "rb")
        except _MISSING:  # a directory is a key prefix, not an object (as on S3)
            raise BlobNotFoundError(f"file: blob {key} not found") from None
        except OSError as e:
            raise BlobStoreError(f"file: get {key}: {e.strerror}") from e
        with f:
            f.seek(start)
            remaining = length if length is not None else -1
            written = 0
            while remaining:
                chunk = f.read(COPY_BUF if remaining < 0 else min(COPY_BUF, remaining))
                if not chunk:
                    break
                dst.write(chunk)
                written += len(chunk)
                if remaining > 0:
                    remaining -= len(chunk)
            return written

    def delete(self, keys: Iterable[str]) -> None:
        for batch in key_batches(keys, self.delete_batch):
            paths = [(key, self._path(key)) for key in batch]  # an invalid key fails its batch before any unlink
            for key, path in paths:
                for p in (path, self._ttl_path(path)):
                    try:
                        p.unlink()
                    except _MISSING:
                        pass
                    except OSError as e:
                        raise BlobStoreError(f"file: delete {key}: {e.strerror}") from e

    def remove_ttl(self, key: str) -> None:
        path = self._path(key)
        if not path.is_file():
            raise BlobNotFoundError(f"file: blob {key} not found")
        try:
            self._ttl_path(path).unlink(missing_ok=True)
        except OSError as e:
            raise BlobStoreError(f"file: remove_ttl {key}: {e.strerror or e}") from e

    def copy(self, key: str, *, ttl_seconds: int | None, source: BlobStore | None = None,
             size: int | None = None) -> str:
        """A new key for the blob's bytes, made like ``put``'s: TTL first, then the name, durable. With a TTL,
        a hard link to the source's file (its bytes are durable since it was written; the link's name is
        fsynced), dated by its TTL sidecar (module doc); without one, or where no link can be made, a byte
        copy in the kernel, fsynced, renamed into place. The source is never changed, its mtime included."""
        origin = innermost(source) if source is not None else self
        if not isinstance(origin, LocalBlobStore):
            raise UsageError(f"file: copy {key}: {source.url if source else ''} is not a file:// store; "  # type: ignore[union-attr]
                             "stream it through the client")
        src = origin._path(key)
        new_key = new_blob_key()
        dst = self._path(new_key)
        try:
            if not S_ISREG(os.stat(src).st_mode):  # a dir is a key prefix, not an object (as on S3)
                raise BlobNotFoundError(f"file: blob {key} not found")
        except _MISSING:
            raise BlobNotFoundError(f"file: blob {key} not found") from None
        except OSError as e:
            raise BlobStoreError(f"file: copy {key}: {e.strerror or e}") from e
        if ttl_seconds is not None:
            self._write_ttl(dst, ttl_seconds)
        try:
            if ttl_seconds is None or not self._link(key, src, dst):
                self._copy_bytes(key, src, dst)
        except BaseException:
            self._ttl_path(dst).unlink(missing_ok=True)
            raise
        return new_key

    def _link(self, key: str, src: Path, dst: Path) -> bool:
        """Hard-link ``dst`` to ``src`` and fsync its dir; False where no link can be made here (_NO_LINK)."""
        try:
            os.link(src, dst)
        except _MISSING:
            raise BlobNotFoundError(f"file: blob {key} not found") from None
        except OSError as e:
            if e.errno in _NO_LINK:
                return False
            if e.errno == errno.ENOSPC:
                raise DiskFullError(f"file: no space left linking {dst}") from e
            raise BlobStoreError(f"file: copy {key}: {e.strerror or e}") from e
        try:
            fsync_dir(dst.parent)
        except BaseException:
            dst.unlink(missing_ok=True)
            raise
        return True

    def _copy_bytes(self, key: str, src: Path, dst: Path) -> None:
        try:
            f = open(src, "rb")
        except _MISSING:
            raise BlobNotFoundError(f"file: blob {key} not found") from None
        except OSError as e:
            raise BlobStoreError(f"file: copy {key}: {e.strerror or e}") from e
        with f:
            self._write_atomic(dst, lambda out: _copy_in_kernel(f, out))

    def _ttl(self, path: Path) -> tuple[float | None, float]:
        """The blob's expiry (None: no TTL; 0.0: a damaged sidecar, which reads as expired) and when its
        sidecar was written (0.0: none)."""
        try:
            with open(self._ttl_path(path), "rb") as f:
                made = os.fstat(f.fileno()).st_mtime
                data = f.read()
        except FileNotFoundError:
            return None, 0.0
        try:
            return float(data), made
        except ValueError:
            return 0.0, made

    def stat(self, key: str) -> BlobInfo:
        path = self._path(key)
        try:
            st = path.stat()
        except _MISSING:
            raise BlobNotFoundError(f"file: blob {key} not found") from None
        except OSError as e:
            raise BlobStoreError(f"file: stat {key}: {e.strerror or e}") from e
        if not S_ISREG(st.st_mode):
            raise BlobNotFoundError(f"file: blob {key} not found")
        expires, made = self._ttl(path)
        return BlobInfo(key, st.st_size, max(st.st_mtime, made), expires)

    def list(self, prefix: str = "", *, start_after: str | None = None) -> Iterator[BlobInfo]:
        """A depth-first walk, one directory read (and sorted) at a time: memory holds the entries of
        the dirs on the current path (for data blobs, one ``blobs/<xx>/``: a 256th of them), never the
        whole tree. Subtrees outside ``prefix`` or wholly before ``start_after`` are not read. Symlinked
        dirs are not followed; links to files are listed, other non-regular files are not."""
        self._require_root()
        return self._list_dir(str(self.root), "", prefix, start_after)

    def _list_dir(self, path: str, rel: str, prefix: str, start_after: str | None) -> Iterator[BlobInfo]:
        try:
            with os.scandir(path) as it:
                # Sorted as the keys sort: a dir's keys all start with "<name>/", so it sorts as that.
                entries = sorted((e.name + "/" if e.is_dir() else e.name, e.is_symlink()) for e in it)
        except _MISSING:  # removed meanwhile (or not created yet)
            return
        except OSError as e:
            raise BlobStoreError(f"file: list {rel or '.'} in {self.root}: {e.strerror or e}") from e
        # A blob's TTL sidecar is in the same dir: no sidecar in the listing, no need to try to read one.
        ttls = {name for name, _ in entries if name.endswith(TTL_SUFFIX)}
        for name, link in entries:
            key = rel + name
            if name.endswith("/"):
                if link:
                    continue
                if not (key.startswith(prefix) or prefix.startswith(key)):
                    continue
                if start_after is not None and key <= start_after and not start_after.startswith(key):
                    continue  # every key below sorts before start_after
                yield from self._list_dir(os.path.join(path, name[:-1]), key, prefix, start_after)
                continue
            if name.endswith((TTL_SUFFIX, LOCK_SUFFIX)) or name.startswith(TMP_MARK) or not key.startswith(prefix):
                continue
            if start_after is not None and key <= start_after:
                continue
            full = os.path.join(path, name)
            try:
                st = os.stat(full)
            except _MISSING:
                continue
            except OSError as e:
                raise BlobStoreError(f"file: list {key}: {e.strerror or e}") from e
            if not S_ISREG(st.st_mode):
                continue
            expires, made = self._ttl(Path(full)) if name + TTL_SUFFIX in ttls else (None, 0.0)
            yield BlobInfo(key, st.st_size, max(st.st_mtime, made), expires)

    def sweep_debris(self, older_than: float, *, dry_run: bool = False) -> list[BlobInfo]:
        """Partial files of killed writes (``.tmp-*``, sidecars' included) and ``<key>.ttl`` sidecars
        whose blob never landed or is gone, under statectl's own top-level dirs (STATECTL_PREFIXES) only:
        the root may be a dir that holds other files too, and those are never statectl's to remove. Lock
        files stay: one may be held by a live process, and removing it would let a second process lock a
        new file of the same name (they are one small file per lease). Empty dirs stay: a concurrent put
        may be about to write into one."""
        self._require_root()
        found: list[BlobInfo] = []
        for prefix in STATECTL_PREFIXES:
            top = self.root / prefix.rstrip("/")
            if top.is_symlink() or not top.is_dir():
                continue  # statectl makes these dirs itself; a link may lead anywhere
            for dirpath, _, filenames in os.walk(top):
                for name in filenames:
                    path = Path(dirpath, name)
                    if not name.startswith(TMP_MARK):
                        if not name.endswith(TTL_SUFFIX) or path.with_name(name[: -len(TTL_SUFFIX)]).exists():
                            continue
                    try:
                        st = path.lstat()
                    except FileNotFoundError:
                        continue
                    if st.st_mtime >= older_than or not S_ISREG(st.st_mode):
                        continue
                    if not dry_run:
                        try:
                            path.unlink()
                        except FileNotFoundError:
                            continue
                        except OSError as e:
                            raise BlobStoreError(f"file: delete {path}: {e.strerror or e}") from e
                    found.append(BlobInfo(path.relative_to(self.root).as_posix(), st.st_size, st.st_mtime))
        return found

    def close(self) -> None:
        pass


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def _copy_in_kernel(src: BinaryIO, dst: BinaryIO) -> None:
    """Copy ``src`` to ``dst`` (both real files) inside the kernel (copy_file_range: no bytes through this
    process, and a reflink where the filesystem offers one), falling back to a read/write loop."""
    dst.flush()
    try:
        while os.copy_file_range(src.fileno(), dst.fileno(), 64 * COPY_BUF):
            pass
        return
    except (AttributeError, OSError) as e:  # no copy_file_range (old kernel, another OS, across some mounts)
        if isinstance(e, OSError) and e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            raise
    src.seek(0)
    dst.seek(0)
    dst.truncate()
    shutil.copyfileobj(src, dst, COPY_BUF)


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
