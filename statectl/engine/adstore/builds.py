"""The dirs a Spark build of adstore load writes its SST files into, beside the stores (BUILD_DIR_PREFIX),
until every store built from them is swapped in: a load interrupted during the ingest re-runs from them.

Such a dir is removed only when its name and every entry in it are a build's (``is_build_dir``), and no load
holds its lock file (BUILD_LOCK, flocked by ``BuildLock`` while a load uses the dir).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from statectl.errors import LockHeldError, UsageError

BUILD_DIR_PREFIX = ".adstore-build-"  # beside the stores: a Spark build's SST files until they are ingested
BUILD_LOCK = ".adstore-build.lock"  # in a build dir: flocked by the load using it
OLD_BUILD_S = 24 * 3600


def remove_old_builds(ours: Path) -> None:
    """Remove the dirs other Spark builds left beside ``ours`` (a failed build keeps its log for a while)
    once nothing in them changed for OLD_BUILD_S: only dirs that are provably a build's (is_build_dir)
    and that no load is using (their BUILD_LOCK is free)."""
    import fcntl

    if not ours.parent.is_dir():
        return
    for p in ours.parent.iterdir():
        if p == ours or not is_build_dir(p):
            continue
        try:
            newest = max([p.stat().st_mtime] + [f.lstat().st_mtime for f in p.iterdir()])
        except OSError:
            continue
        if time.time() - newest <= OLD_BUILD_S:
            continue
        try:
            fd = os.open(p / BUILD_LOCK, os.O_RDONLY)
        except FileNotFoundError:
            fd = None
        except OSError:
            continue
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a load is using it
            remove_build(p)
        finally:
            if fd is not None:
                os.close(fd)


def is_build_dir(p: Path) -> bool:
    """Whether ``p`` is provably a dir a Spark build of adstore load made: named ``.adstore-build-<16 hex>``,
    a real dir (not a link), holding only regular files named as a build names them."""
    import re

    from statectl.spark.submit import BUILD_MANIFEST, JOB_FILE, LOG_FILE, SST_PREFIX

    if not re.fullmatch(re.escape(BUILD_DIR_PREFIX) + "[0-9a-f]{16}", p.name) or p.is_symlink() or not p.is_dir():
        return False
    try:
        for f in p.iterdir():
            if f.is_symlink() or not f.is_file():
                return False
            if f.name not in (BUILD_MANIFEST, JOB_FILE, LOG_FILE, BUILD_LOCK) and not f.name.startswith(
                    (SST_PREFIX, f".{SST_PREFIX}", f".{BUILD_MANIFEST}")):
                return False
    except OSError:
        return False
    return True


def remove_build(p: Path) -> None:
    """Remove the build dir ``p`` if it is provably a build's (best effort: what stays is removed later)."""
    import shutil

    if is_build_dir(p):
        shutil.rmtree(p, ignore_errors=True)


class BuildLock:
    """This load uses the build dir: an flock on its BUILD_LOCK, so that no other load's remove_old_builds
    removes it meanwhile. Refuses (UsageError) a dir of that name that is not provably a build's."""

    def __init__(self, build_dir: Path):
        self.build_dir = build_dir
        self._fd: int | None = None

    def __enter__(self) -> "BuildLock":
        import fcntl

        if os.path.lexists(self.build_dir) and not is_build_dir(self.build_dir):
            raise UsageError(f"{self.build_dir} is not a build dir adstore load made: refusing to build into it",
                             hint="move it away")
        self.build_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.build_dir / BUILD_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockHeldError(f"the Spark build dir {self.build_dir} is in use by another adstore load",
                                hint="wait for that load to finish") from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

