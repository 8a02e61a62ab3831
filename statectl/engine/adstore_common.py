"""adstore: what the loads of read-only (adjunct) stores share (seed 003): engine.adstore_topic loads a
topic, engine.adstore_files a file dataset, engine.adstore_versions lists and switches a versioned
store's versions; engine.adstore_dataset, engine.adstore_job and engine.adstore_status build on them.

One load per store at a time, from a topic or from files, and ``switch_version`` too: each holds the
store's local.versions.StoreLock (``<store>.adstore.lock`` beside it; LockHeldError, exit 11, naming the
holder) for its whole run; the version chain is written only under it.

With SparkOptions a load builds its stores from SST files a Spark job wrote (statectl.spark) into a dir
beside the stores (BUILD_DIR_PREFIX). Such a dir is removed only when its name and every entry in it are
a build's, and no load holds its lock file (BUILD_LOCK).

The names with a leading underscore here are shared by the adstore_* modules only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.errors import LockHeldError, StatectlError, UsageError
from statectl.formats.adstore import KeyValueSpec

BUILD_DIR_PREFIX = ".adstore-build-"  # beside the stores: a Spark build's SST files until they are ingested
BUILD_LOCK = ".adstore-build.lock"  # in a build dir: flocked by the load using it
OLD_BUILD_S = 24 * 3600


class AdstoreExtractError(StatectlError):
    """A record or row the key/value spec cannot turn into an entry; the message names where it is.
    What came before it is applied and recorded; it and what follows are not."""


@dataclass(frozen=True)
class SparkOptions:
    """The bulk path: spark-submit to ``master`` with ``conf``. ``staging``: "local" (the executors write
    the SST files beside the stores: local mode, or a filesystem every executor shares) or the URL of a
    blob store they travel through (``s3`` its S3Options). The build's files stay in a dir beside the
    stores until every store is swapped in: a load interrupted during the ingest re-runs from them."""

    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    staging: str = "local"
    s3: Any = None


def _check_spec(spec: KeyValueSpec, *, topic: bool) -> None:
    if topic:
        if spec.key_column or spec.value_column or spec.value_columns:
            raise UsageError("a file's columns (--value-fields) are for --from-file; a topic takes --key-field, "
                             "--value-field or --extractor")
        if spec.extractor and (spec.key_field or spec.value_field):
            raise UsageError("--extractor replaces --key-field/--value-field: pass one or the other")
    else:
        if spec.key_field or spec.value_field or spec.extractor:
            raise UsageError("--extractor is for --topic; a file row's key and value are --key-field, "
                             "--value-field or --value-fields")
        if not spec.key_column:
            raise UsageError("--from-file needs --key-field (the key column)")
        if spec.value_column and spec.value_columns:
            raise UsageError("--value-field and --value-fields exclude each other")


def _remove_old_builds(ours: Path) -> None:
    """Remove the dirs other Spark builds left beside ``ours`` (a failed build keeps its log for a while)
    once nothing in them changed for OLD_BUILD_S: only dirs that are provably a build's (_is_build_dir)
    and that no load is using (their BUILD_LOCK is free)."""
    import fcntl

    if not ours.parent.is_dir():
        return
    for p in ours.parent.iterdir():
        if p == ours or not _is_build_dir(p):
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
            _remove_build(p)
        finally:
            if fd is not None:
                os.close(fd)


def _is_build_dir(p: Path) -> bool:
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


def _remove_build(p: Path) -> None:
    """Remove the build dir ``p`` if it is provably a build's (best effort: what stays is removed later)."""
    import shutil

    if _is_build_dir(p):
        shutil.rmtree(p, ignore_errors=True)


class _BuildLock:
    """This load uses the build dir: an flock on its BUILD_LOCK, so that no other load's _remove_old_builds
    removes it meanwhile. Refuses (UsageError) a dir of that name that is not provably a build's."""

    def __init__(self, build_dir: Path):
        self.build_dir = build_dir
        self._fd: int | None = None

    def __enter__(self) -> "_BuildLock":
        import fcntl

        if os.path.lexists(self.build_dir) and not _is_build_dir(self.build_dir):
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

