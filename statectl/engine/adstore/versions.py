"""adstore versions and switch: the sealed versions of a versioned store (local.versions: a link ``S`` to
``S.versions/<n>``, made by engine.adstore.files and engine.adstore.dataset), and switching it to another
one (a rollback) under the store's StoreLock (engine.adstore.common).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from statectl.errors import NotFoundError


@dataclass
class VersionInfo:
    version: int
    current: bool
    created: str | None
    rows: int | None
    keys: int | None
    checksum: str | None
    built_with: str | None
    source: str | None
    problem: str | None = None


@dataclass
class VersionsResult:
    store_dir: str
    current: int | None
    versions: list[VersionInfo] = field(default_factory=list)


def versions(store: Path, *, quick: bool = False) -> VersionsResult:
    """The sealed versions of a versioned store, oldest first, each with the ``problem`` the checks of
    ``adstore switch`` find (local.versions.version_problem; None: none found): by default every entry of
    every version read and compared with its manifest (count, key range, checksum: one read of each
    version), so a version that no longer matches its manifest is named, as switch would refuse it;
    ``quick``: only the cheap checks (a damaged manifest, not a RocksDB store, SST files gone). Read-only
    (a version is opened read-only; the config file rocksdict drops into it is removed again), takes no
    lock. NotFoundError when it has none."""
    from statectl.local.versions import current_version, list_versions, version_problem

    store = Path(store).absolute()
    found = list_versions(store)
    if not found:
        raise NotFoundError(f"{store} has no versions", hint="build one with adstore load --from-file")
    out = VersionsResult(str(store), current_version(store))
    for v in found:
        m = v.manifest
        problem = v.problem
        if problem is None and m is not None and not quick:
            problem = version_problem(v.path, m, v.number, deep=True)
        out.versions.append(VersionInfo(v.number, v.current, m.created if m else None, m.rows if m else None,
                                        m.digest.keys if m else None, f"{m.digest.checksum:016x}" if m else None,
                                        m.built_with if m else None, m.source if m else None, problem))
    return out


@dataclass
class SwitchResult:
    store_dir: str
    version: int
    previous: int | None


@dataclass
class SwitchPlan:
    """What ``switch_version`` will do: make ``version`` of ``store_dir`` current instead of ``previous``,
    after the check named by ``check`` ("deep": every entry against the manifest; "quick"), which the plan
    has already passed. ``adstore switch --dry-run`` prints it; ``switch_version`` executes exactly it."""

    store_dir: str
    version: int
    previous: int | None
    check: str
    dry_run: bool = True


def plan_switch(store: Path, version: int | None = None, *, quick: bool = False) -> SwitchPlan:
    """The plan of ``switch_version(store, version, quick=quick)``, with its checks made (the deep one reads
    every entry) and nothing written: no lock file, no link (the deep check opens the version read-only,
    and removes again the config file rocksdict drops into it). Raises what ``switch_version`` raises
    (LockHeldError too: another load or switch runs on the store; no lock is taken). Idempotent."""
    from statectl.local.versions import StoreLock, current_version, list_versions

    store = Path(store).absolute()
    if current_version(store) is None and not list_versions(store):
        raise NotFoundError(f"{store} has no versions", hint="build one with adstore load --from-file")
    StoreLock(store).check_free()
    return _plan_switch(store, version, quick)


def _plan_switch(store: Path, version: int | None, quick: bool) -> SwitchPlan:
    from statectl.local.versions import check_switch, current_version, list_versions

    current = current_version(store)
    if version is None:
        older = [v.number for v in list_versions(store) if current is not None and v.number < current
                 and v.manifest is not None]
        if not older:
            raise NotFoundError(f"{store} has no version older than its current one ({current}) to roll back to")
        version = older[-1]
    check = "quick" if quick else "deep"
    check_switch(store, version, verify=check)
    return SwitchPlan(str(store), version, current, check)


def switch_version(store: Path, version: int | None = None, *, quick: bool = False) -> SwitchResult:
    """Make ``version`` current (None: the newest version older than the current one: a rollback), under
    the store's StoreLock, after checking it against its manifest: every entry read, their count, key range
    and checksum compared (one read of the whole store, about a million entries a second here); ``quick``:
    only the cheap checks and that it opens. Raises NotFoundError when there is no such sealed version;
    StatectlError (exit 1) when it is damaged (nothing is changed); LockHeldError (exit 11) while an adstore
    load or switch runs on the store; UsageError for a dir that is not a versioned adstore. The switch made
    is the plan ``plan_switch`` computes, made here under the lock."""
    from statectl.local.versions import StoreLock, current_version, list_versions

    store = Path(store).absolute()
    # a plain store dir is refused, a store without versions not found, before the lock file is made
    if current_version(store) is None and not list_versions(store):
        raise NotFoundError(f"{store} has no versions", hint="build one with adstore load --from-file")
    with StoreLock(store):
        return execute_switch(_plan_switch(store, version, quick))


def execute_switch(plan: SwitchPlan) -> SwitchResult:
    """Point the store at ``plan.version`` (its checks were made by the plan; the caller holds the store's
    StoreLock). Raises NotFoundError should the version have gone since."""
    from statectl.local.versions import switch

    previous = switch(Path(plan.store_dir), plan.version, verify=None)
    return SwitchResult(plan.store_dir, plan.version, previous)
