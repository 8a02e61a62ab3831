"""Versions of a read-only store built from a file dataset (a bounded dataset): each built
beside the current one, sealed, then switched to by one atomic pointer.

Layout, for the store dir ``S`` (``<state>/<store>/<task>``)::

    S                      a symlink to S.versions/<n>: the current version (what the job opens)
    S.versions/<n>/        a sealed version: a RocksDB store and its manifest (formats.adstore.MANIFEST)
    S.versions/.building-<n>-<pid>-<rand>/   a build in progress (removed when it fails; left by a
                                             killed build, removed by the next one once <pid> is gone)

A version becomes visible only when sealed (its manifest written and fsynced, then the dir renamed to
``<n>``), and current only by ``switch``: a symlink made beside ``S`` and renamed over it. A reader that
opened the old version keeps it until it reopens ``S``. A failed or interrupted build never becomes
current, nor even a version.

One load (or switch) per store at a time: :class:`StoreLock` (flock on ``S.adstore.lock`` beside ``S``;
the name must not contain ``<task dir>-``, which Samza's cleanup of the store's parent deletes). The
version chain (build numbers, switch, prune) is written only under it.

Only what this module provably made is ever deleted: a version dir (``<n>``, a real dir, with a manifest
file, sealed by a build), a build dir (``.building-<n>-<pid>-<8 hex>``, a real dir) whose process is gone.
A symlink, or a dir of another name, in ``S.versions`` is left alone.

Run as root, everything a load makes here (the lock file, the versions dir, a version, the link ``S``)
belongs to the owner of the store's parent dir (fsutil.owner_of): the job's user, who opens it.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from statectl.errors import LockHeldError, NotFoundError, StatectlError, UsageError
from statectl.formats.adstore import MANIFEST, VersionManifest
from statectl.fsutil import (
    SYNC_NONE,
    chown_tree,
    fsync_dir,
    fsync_tree,
    make_dirs,
    owner_of,
    process_alive,
    write_atomic,
)

VERSIONS_SUFFIX = ".versions"
BUILDING = ".building-"
LOCK_SUFFIX = ".adstore.lock"  # beside the store dir: S.adstore.lock (never "S-...": Samza deletes those)
_BUILD_NAME = re.compile(re.escape(BUILDING) + r"(\d+)-(\d+)-[0-9a-f]{8}")


def versions_dir(store: Path) -> Path:
    return store.with_name(store.name + VERSIONS_SUFFIX)


@dataclass
class Version:
    number: int
    path: Path
    manifest: VersionManifest | None  # None: its manifest is unreadable (damaged)
    current: bool
    problem: str | None = None


class StoreLock:
    """One adstore load (or switch) of the store dir ``store`` at a time: an exclusive, non-blocking flock
    on ``<store>.adstore.lock`` beside it (the kernel drops it when its holder dies, even by SIGKILL), which
    also records the holder's pid. The lock file stays (deleting it would let two processes lock two
    different files). Raises LockHeldError (exit 11) naming the holder when another process has it."""

    def __init__(self, store: Path):
        self.store = Path(store)
        self.path = lock_path(self.store)
        self._fd: int | None = None

    def __enter__(self) -> "StoreLock":
        owner = owner_of(self.path.parent)
        make_dirs(self.path.parent, owner)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        chown_tree(self.path, owner)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            error = self._held(fd)
            os.close(fd)
            raise error from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def check_free(self) -> None:
        """Raise the LockHeldError entering would raise, taking nothing: no lock file is made or written (a
        dry run's check). A shared flock is tried and let go at once, so dry runs never stop each other;
        a load or switch that starts in that instant may find the store held (exit 11) and can run again."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return  # never locked
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise self._held(fd) from None
        finally:
            os.close(fd)  # closing drops the flock

    def _held(self, fd: int) -> LockHeldError:
        pid = _lock_pid(fd)
        for _ in range(10):  # a holder that has just taken the lock writes its pid right after
            if pid:
                break
            time.sleep(0.02)
            pid = _lock_pid(fd)
        who = f"process {pid}" if pid else "another process"
        return LockHeldError(f"store {self.store} is locked by {who}, an adstore load or switch (it holds "
                             f"{self.path.name})", hint="wait for it to finish, or stop it: one adstore load "
                                                         "or switch runs per store at a time")

    def __exit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock


def lock_path(store: Path) -> Path:
    """``<store>.adstore.lock``, beside the store dir."""
    return Path(store).with_name(Path(store).name + LOCK_SUFFIX)


def _lock_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def current_version(store: Path) -> int | None:
    """The number of the version ``store`` points at, None when it is not a versioned store (absent).
    Raises UsageError when ``store`` exists but is not a version pointer (a plain store dir)."""
    if not os.path.lexists(store):
        return None
    if not store.is_symlink():
        raise UsageError(f"{store} is a store dir, not a versioned adstore (a link to {versions_dir(store).name}/<n>)",
                         hint="load file datasets into another --store, or move that store away first")
    target = Path(os.readlink(store))
    if target.parent.name != versions_dir(store).name or not target.name.isdigit():
        raise UsageError(f"{store} links to {target}, not to a version in {versions_dir(store)}")
    return int(target.name)


def list_versions(store: Path) -> list[Version]:
    """The sealed versions of ``store``, oldest first, the current one marked, each with the ``problem``
    the cheap checks of :func:`version_problem` find (None: none found). A symlink in the versions dir is
    no version."""
    current = current_version(store)
    root = versions_dir(store)
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        if not p.name.isdigit() or p.is_symlink() or not p.is_dir():
            continue
        manifest, problem = None, None
        try:
            manifest = VersionManifest.from_json((p / MANIFEST).read_text())
        except (OSError, ValueError) as e:
            problem = f"damaged: its manifest cannot be read ({e})"
        else:
            problem = version_problem(p, manifest, int(p.name))
        out.append(Version(int(p.name), p, manifest, int(p.name) == current, problem))
    return sorted(out, key=lambda v: v.number)


def version_problem(path: Path, manifest: VersionManifest, number: int, *, deep: bool = False) -> str | None:
    """What is wrong with the sealed version at ``path`` as its ``manifest`` describes it, or None.

    The cheap checks (a few stats, what ``adstore versions`` runs on every version): the manifest is this
    version's; the dir is a RocksDB store (CURRENT names a MANIFEST that is there); a version with keys has
    SST files (a sealed build flushed every entry into them). ``deep`` (what ``adstore switch`` runs) also
    opens the store read-only and reads every entry: their count, key range and checksum must equal the
    manifest's. Its cost is one read of the whole store (about a million entries a second here)."""
    from statectl.rocks.store import is_store

    if manifest.version != number:
        return f"damaged: its manifest is of version {manifest.version}"
    if not is_store(path):
        return "damaged: not a RocksDB store (its CURRENT or MANIFEST file is missing)"
    if manifest.digest.keys and not any(p.suffix == ".sst" for p in path.iterdir()):
        return f"damaged: its manifest counts {manifest.digest.keys} keys but it holds no SST file"
    if not deep:
        return None
    from statectl.rocks.sst import scan_digest

    try:
        found = scan_digest(path)
    except (StatectlError, OSError) as e:
        return f"damaged: {e}"
    if found.as_json() != manifest.digest.as_json():
        want, got = manifest.digest.as_json(), found.as_json()
        return (f"damaged: it holds {got['keys']} keys with checksum {got['checksum']}, its manifest says "
                f"{want['keys']} keys with checksum {want['checksum']}")
    return None


class VersionBuild:
    """A new version of ``store``, built in a temporary dir of its versions dir::

        with VersionBuild(store) as build:
            fill(build.path)                  # an empty dir
            build.seal(manifest)              # manifest.version is build.number
        switch(store, build.number)

    Leaving the block without ``seal`` removes the dir. The number is one above every version and every
    build in progress (so concurrent builds never collide), and at least ``at_least`` (the stores of one
    load share a version number). A build whose life is not one block (a version of a stream, ended by its
    marker) calls ``open()`` and ``close()``, which are what the block does."""

    def __init__(self, store: Path, *, at_least: int = 1):
        self.store = Path(store)
        self.at_least = at_least
        self.root = versions_dir(self.store)
        self.number = 0
        self.path = Path()
        self.sealed: Path | None = None
        self.owner = (os.geteuid(), os.getegid())  # open() sets the store's

    def __enter__(self) -> "VersionBuild":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> "VersionBuild":
        """Pick the number and make the build dir (see the class doc); return self."""
        current_version(self.store)  # refuses a plain store dir before anything is written
        if os.path.islink(self.root):
            raise UsageError(f"{self.root} is a symlink, not the versions dir adstore load made",
                             hint="move it away, or load into another --store")
        self.owner = owner_of(self.store.parent)
        make_dirs(self.root, self.owner)
        remove_dead_builds(self.store)
        for _ in range(100):
            self.number = max(next_number(self.store), self.at_least)
            self.path = self.root / f"{BUILDING}{self.number}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            self.path.mkdir()
            if not (self.root / str(self.number)).exists():
                return self
            shutil.rmtree(self.path, ignore_errors=True)
        raise StatectlError(f"cannot pick a version number in {self.root}")

    def seal(self, manifest: VersionManifest) -> Path:
        """Write the manifest, fsync the build, and rename it to its version dir; return that dir."""
        if manifest.version != self.number:
            raise ValueError(f"manifest of version {manifest.version} sealing build {self.number}")
        write_atomic(self.path / MANIFEST, manifest.to_json(), sync=SYNC_NONE)
        chown_tree(self.path, self.owner)
        fsync_tree(self.path)
        final = self.root / str(self.number)
        os.rename(self.path, final)
        fsync_dir(self.root)
        self.sealed = final
        return final

    def close(self) -> None:
        """Remove the build dir unless it was sealed (then it is the version dir, kept)."""
        if self.sealed is None:
            shutil.rmtree(self.path, ignore_errors=True)


def switch(store: Path, number: int, *, verify: str | None = "deep") -> int | None:
    """Point ``store`` at sealed version ``number`` atomically; return the version it pointed at before.
    The caller holds the store's StoreLock.

    ``verify``: "deep" checks the version against its manifest entry by entry first (version_problem, deep:
    one read of the whole store), "quick" only the cheap checks and that it opens, None nothing (a build
    this process just sealed). Raises NotFoundError for a version that is not there or not sealed (a
    damaged manifest); StatectlError (exit 1) for a damaged version, and then ``store`` is not changed."""
    previous = current_version(store)
    check_switch(store, number, verify=verify)
    link = store.with_name(f".{store.name}.link-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.symlink(f"{versions_dir(store).name}/{number}", link)
    try:
        chown_tree(link, owner_of(store.parent))
        os.replace(link, store)
    except OSError:
        link.unlink(missing_ok=True)
        raise
    fsync_dir(store.parent)
    return previous


def check_switch(store: Path, number: int, *, verify: str | None = "deep") -> None:
    """The checks ``switch`` makes before it changes anything, changing nothing (a dry run makes them too):
    raises what ``switch`` raises for a version that is missing, not sealed or damaged."""
    path = versions_dir(store) / str(number)
    if path.is_symlink() or not path.is_dir():
        have = ", ".join(str(v.number) for v in list_versions(store)) or "none"
        raise NotFoundError(f"{store} has no version {number} (versions: {have})")
    try:
        manifest = VersionManifest.from_json((path / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise NotFoundError(f"version {number} of {store} is not sealed: {e}",
                            hint="switch to another version; build a new one with adstore load --from-file") from None
    if verify is not None:
        problem = version_problem(path, manifest, number, deep=verify == "deep")
        if problem is None and verify == "quick":
            problem = _open_problem(path)
        if problem is not None:
            raise StatectlError(f"version {number} of {store} is {problem}; not switched",
                                hint="switch to another version (adstore versions lists them), or build a new one "
                                     "with adstore load --from-file")


def open_problem(path: Path) -> str | None:
    """Why the store at ``path`` does not open read-only (the first line of the error), or None. Leaves
    nothing behind: the config file rocksdict drops into a dir it opens is removed again."""
    from statectl.rocks.store import ROCKSDICT_CONFIG, open_readonly

    had_config = (path / ROCKSDICT_CONFIG).exists()
    try:
        open_readonly(path).close()
    except Exception as e:  # noqa: BLE001 - rocksdict raises its own exception types
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    finally:
        if not had_config:  # rocksdict drops its config into every dir it opens
            (path / ROCKSDICT_CONFIG).unlink(missing_ok=True)
    return None


def _open_problem(path: Path) -> str | None:
    """Why the store at ``path`` does not open read-only, or None."""
    problem = open_problem(path)
    return None if problem is None else f"damaged: it does not open ({problem})"


def prune(store: Path, keep: int) -> list[int]:
    """Delete all but the ``keep`` newest sound versions, never the current one; return the numbers deleted.
    The caller holds the store's StoreLock. A damaged version (a problem found by the cheap checks) can
    never be switched to: it counts for nothing and goes too, but only a dir this module provably sealed
    (it holds a manifest file, readable or not); a digit-named dir without one, or a symlink, is not
    touched. A reader of a deleted version keeps its open files."""
    versions = {v.number: v for v in list_versions(store)}
    gone = []
    for number in prunable(store, keep):
        v = versions[number]
        try:
            shutil.rmtree(v.path)
        except OSError:
            continue  # best effort: the next prune tries again
        gone.append(v.number)
    return gone


def prunable(store: Path, keep: int, *, new: int | None = None) -> list[int]:
    """The versions ``prune(store, keep)`` deletes, deleting nothing; ``new``: as it will be once a sound
    version ``new`` is made current (what a load then prunes). UsageError for ``keep`` below 1."""
    if keep < 1:
        raise UsageError("--keep-versions must be at least 1")
    versions = list_versions(store)
    sound = [v.number for v in versions if v.manifest is not None and v.problem is None]
    current = {v.number for v in versions if v.current} if new is None else {new}
    keep_numbers = set((sound + ([new] if new is not None else []))[-keep:]) | current
    return [v.number for v in versions if v.number not in keep_numbers and os.path.lexists(v.path / MANIFEST)]


def next_number(store: Path, *, live_builds_only: bool = False) -> int:
    """One above every version of ``store`` and every build of one in progress."""
    root = versions_dir(store)
    if not root.is_dir():
        return 1
    taken = [int(p.name) for p in root.iterdir() if p.name.isdigit()]
    taken += [int(p.name[len(BUILDING):].split("-")[0]) for p in root.iterdir()
              if p.name.startswith(BUILDING) and p.name[len(BUILDING):].split("-")[0].isdigit()
              and not (live_builds_only and _dead_build(p))]
    return max(taken, default=0) + 1


def _dead_build(p: Path) -> bool:
    m = _BUILD_NAME.fullmatch(p.name)
    return bool(m) and not p.is_symlink() and p.is_dir() and not process_alive(int(m.group(2)))


def remove_dead_builds(store: Path) -> None:
    """Remove the build dirs VersionBuild made (``.building-<n>-<pid>-<8 hex>``, a real dir, not a link)
    whose process is gone (a killed build). Anything else in the versions dir is left alone."""
    root = versions_dir(store)
    if not root.is_dir():
        return
    for p in root.iterdir():
        m = _BUILD_NAME.fullmatch(p.name)
        if m and not p.is_symlink() and p.is_dir() and not process_alive(int(m.group(2))):
            shutil.rmtree(p, ignore_errors=True)


