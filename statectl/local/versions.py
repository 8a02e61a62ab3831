"""Versions of a read-only store built from a file dataset (seed 003, "bounded datasets"): each built
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
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from statectl.errors import NotFoundError, StatectlError, UsageError
from statectl.formats.adstore import MANIFEST, VersionManifest
from statectl.local.staged import fsync_tree, process_alive

VERSIONS_SUFFIX = ".versions"
BUILDING = ".building-"


def versions_dir(store: Path) -> Path:
    return store.with_name(store.name + VERSIONS_SUFFIX)


@dataclass
class Version:
    number: int
    path: Path
    manifest: VersionManifest | None  # None: its manifest is unreadable (damaged)
    current: bool
    problem: str | None = None


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
    """The sealed versions of ``store``, oldest first, the current one marked."""
    current = current_version(store)
    root = versions_dir(store)
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        if not p.name.isdigit() or not p.is_dir():
            continue
        manifest, problem = None, None
        try:
            manifest = VersionManifest.from_json((p / MANIFEST).read_text())
        except (OSError, ValueError) as e:
            problem = str(e)
        out.append(Version(int(p.name), p, manifest, int(p.name) == current, problem))
    return sorted(out, key=lambda v: v.number)


class VersionBuild:
    """A new version of ``store``, built in a temporary dir of its versions dir::

        with VersionBuild(store) as build:
            fill(build.path)                  # an empty dir
            build.seal(manifest)              # manifest.version is build.number
        switch(store, build.number)

    Leaving the block without ``seal`` removes the dir. The number is one above every version and every
    build in progress (so concurrent builds never collide), and at least ``at_least`` (the stores of one
    load share a version number)."""

    def __init__(self, store: Path, *, at_least: int = 1):
        self.store = Path(store)
        self.at_least = at_least
        self.root = versions_dir(self.store)
        self.number = 0
        self.path = Path()
        self.sealed: Path | None = None

    def __enter__(self) -> "VersionBuild":
        current_version(self.store)  # refuses a plain store dir before anything is written
        self.root.mkdir(parents=True, exist_ok=True)
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
        tmp = self.path / (MANIFEST + ".tmp")
        tmp.write_text(manifest.to_json())
        os.replace(tmp, self.path / MANIFEST)
        fsync_tree(self.path)
        final = self.root / str(self.number)
        os.rename(self.path, final)
        _fsync_dir(self.root)
        self.sealed = final
        return final

    def __exit__(self, *exc: object) -> None:
        if self.sealed is None:
            shutil.rmtree(self.path, ignore_errors=True)


def switch(store: Path, number: int) -> int | None:
    """Point ``store`` at sealed version ``number`` atomically; return the version it pointed at before.
    Raises NotFoundError for a version that is not there or not sealed (a damaged manifest)."""
    previous = current_version(store)
    path = versions_dir(store) / str(number)
    if not path.is_dir():
        have = ", ".join(str(v.number) for v in list_versions(store)) or "none"
        raise NotFoundError(f"{store} has no version {number} (versions: {have})")
    try:
        VersionManifest.from_json((path / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise NotFoundError(f"version {number} of {store} is not sealed: {e}",
                            hint="switch to another version; build a new one with adstore load --from-file") from None
    link = store.with_name(f".{store.name}.link-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.symlink(f"{versions_dir(store).name}/{number}", link)
    try:
        os.replace(link, store)
    except OSError:
        link.unlink(missing_ok=True)
        raise
    _fsync_dir(store.parent)
    return previous


def prune(store: Path, keep: int) -> list[int]:
    """Delete all but the ``keep`` newest sealed versions, never the current one (damaged versions, whose
    manifest is unreadable, count for nothing and go too); return the numbers deleted. A reader of a deleted version keeps its open files."""
    if keep < 1:
        raise UsageError("--keep-versions must be at least 1")
    versions = list_versions(store)
    sealed = [v for v in versions if v.manifest is not None]  # a damaged one can never be switched to
    keep_numbers = {v.number for v in sealed[-keep:]} | {v.number for v in versions if v.current}
    gone = []
    for v in versions:
        if v.number not in keep_numbers:
            shutil.rmtree(v.path, ignore_errors=True)
            gone.append(v.number)
    return gone


def next_number(store: Path) -> int:
    """One above every version of ``store`` and every build of one in progress."""
    root = versions_dir(store)
    if not root.is_dir():
        return 1
    taken = [int(p.name) for p in root.iterdir() if p.name.isdigit()]
    taken += [int(p.name[len(BUILDING):].split("-")[0]) for p in root.iterdir()
              if p.name.startswith(BUILDING) and p.name[len(BUILDING):].split("-")[0].isdigit()]
    return max(taken, default=0) + 1


def remove_dead_builds(store: Path) -> None:
    """Remove build dirs whose process is gone (a killed build)."""
    root = versions_dir(store)
    if not root.is_dir():
        return
    for p in root.iterdir():
        parts = p.name[len(BUILDING):].split("-") if p.name.startswith(BUILDING) else []
        if len(parts) >= 2 and parts[1].isdigit() and not process_alive(int(parts[1])):
            shutil.rmtree(p, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
