"""A dataset load's version chain, per store: the loader lock held for the whole run, the store's
StoreLock taken only to change the chain (``ChainLock``), the cursor read and written, where a load resumes
(``resume_store``), the version being built from the records, and at the marker of every partition of
the store the version sealed and switched to, or the marker refused (``end_version``).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.engine.adstore.dataset import (
    CHAIN_WAIT_S,
    LOADER_LOCK_SUFFIX,
    Cursor,
    DatasetLoadOptions,
    DatasetPart,
    DatasetStore,
    DatasetStoreLoad,
    DryChain,
    RefusedMarker,
    SealedVersion,
    cursor_path,
    marker_value,
    parse_dataset_version,
    show_value,
)
from statectl.errors import StatectlError, UsageError
from statectl.formats.adstore import VersionManifest
from statectl.formats.checkpoint import SSP
from statectl.fsutil import chown_tree, make_dirs, owner_of, write_atomic
from statectl.kafka.client import OffsetOutOfRange
from statectl.progress import ProgressReporter


def loader_lock(store: Path) -> Any:
    """The lock one dataset loader of ``store`` holds for its whole run (LockHeldError, exit 11, when another
    has it): local.versions.StoreLock's flock on another file beside the store dir."""
    from statectl.local.versions import StoreLock

    lock = StoreLock(store)
    lock.path = Path(store).with_name(Path(store).name + LOADER_LOCK_SUFFIX)
    return lock


class ChainLock:
    """The store's StoreLock for one change of its version chain, waited for (up to CHAIN_WAIT_S) while an
    ``adstore switch`` or a ``--from-file`` load holds it; LockHeldError (exit 11) after that."""

    def __init__(self, store: Path):
        from statectl.local.versions import StoreLock

        self.lock = StoreLock(store)

    def __enter__(self) -> "ChainLock":
        from statectl.errors import LockHeldError

        deadline = time.monotonic() + CHAIN_WAIT_S
        while True:
            try:
                self.lock.__enter__()
                return self
            except LockHeldError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.lock.__exit__(*exc)


def read_cursor(store: Path, opts: DatasetLoadOptions) -> Cursor:
    path = cursor_path(store)
    if not path.exists():
        return Cursor(opts.topic, opts.system)
    try:
        cursor = Cursor.from_json(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise StatectlError(f"{path} cannot be read ({e}): refusing to guess where the dataset stands",
                            hint="restore the file, or load into another --store") from None
    if (cursor.system, cursor.topic) != (opts.system, opts.topic):
        raise UsageError(f"{store} holds dataset versions of {cursor.system}.{cursor.topic}, not of "
                         f"{opts.system}.{opts.topic}", hint="load into another --store")
    return cursor


def write_cursor(store: Path, cursor: Cursor) -> None:
    path = cursor_path(store)
    owner = owner_of(store.parent)  # run as root: the job's user's, as local.versions makes the versions dir
    make_dirs(path.parent, owner)
    write_atomic(path, cursor.to_json())
    chown_tree(path, owner)


def resume_store(path: Path, ps: list[int], opts: DatasetLoadOptions, consumer: Any,
            progress: ProgressReporter) -> DatasetStore:
    """Where the store stands: its cursor, completed by a version sealed after it (a load killed between
    the seal and the cursor: switched to now if it never was). Checks the offsets are still on the topic."""
    from statectl.kafka.tails import check_in_range
    from statectl.local.versions import current_version, list_versions, remove_dead_builds, switch

    cursor = read_cursor(path, opts)
    dry = DryChain.of(path) if opts.dry_run else None
    with contextlib.nullcontext() if dry else ChainLock(path):
        if not dry:
            remove_dead_builds(path)
        ours = [v for v in list_versions(path) if v.manifest is not None and v.problem is None
                and v.manifest.extra.get("topic") == opts.topic
                and v.manifest.extra.get("system", "kafka") == opts.system]
        if ours and (cursor.store_version is None or ours[-1].number > cursor.store_version):
            v = ours[-1]
            m = v.manifest
            assert m is not None
            if current_version(path) != v.number:
                if dry:
                    dry.current = v.number
                else:
                    switch(path, v.number, verify="quick")
                progress.note(f"{path}: version {v.number} (dataset version {m.extra.get('dataset_version')}) was "
                              "sealed by a load stopped before switching to it: "
                              + ("the load would switch to it" if dry else "switched to it now"))
            cursor.offsets.update({int(k.rsplit(".", 1)[1]): int(o) for k, o in m.extra.get("offsets", {}).items()})
            cursor.dataset_version = int(m.extra["dataset_version"])
            cursor.store_version = v.number
            if not dry:
                write_cursor(path, cursor)
    had = cursor.partitions if cursor.partitions is not None else (sorted(cursor.offsets) or None)
    if had is not None and had != sorted(ps):
        raise UsageError(f"{path} holds dataset versions of partition{'s' if len(had) != 1 else ''} "
                         f"{', '.join(map(str, had))} of {opts.topic}; this load would put partition"
                         f"{'s' if len(ps) != 1 else ''} {', '.join(map(str, sorted(ps)))} in it",
                         hint="load with the layout it was loaded with (--broadcast or not, --partitions), or into "
                              "another --store")
    cursor.partitions = sorted(ps)
    parts = []
    for p in ps:
        off = cursor.offsets.get(p)
        nxt = None if off is None else off + 1
        try:
            check_in_range(consumer, opts.topic, p, opts.bootstrap, nxt)
        except OffsetOutOfRange as e:
            raise StatectlError(f"{path}: the dataset's recorded offsets fell off {opts.topic} ({e}); the current "
                                "version is untouched", hint="load into another --store, or move this one away "
                                                              "to start from the topic as it is now") from None
        parts.append(DatasetPart(p, nxt))
    return DatasetStore(path, parts, DatasetStoreLoad(str(path), list(ps)), cursor, dry=dry)


def put_entry(s: DatasetStore, key: bytes, value: bytes | None) -> None:
    if s.dry is None:  # a dry run counts the record and keeps nothing
        if s.build is None:
            _open_build(s)
        s.batch.append((key, value))
    s.records += 1
    nbytes = len(key) + (len(value) if value is not None else 0)
    s.nbytes += nbytes
    s.load.records += 1
    s.load.bytes += nbytes


def _open_build(s: DatasetStore) -> None:
    from statectl.local.versions import VersionBuild
    from statectl.rocks.writer import StoreWriter

    b = VersionBuild(s.path)
    with ChainLock(s.path):  # the build's number is picked under the lock
        b.open()
    s.build = b
    try:
        s.writer = StoreWriter(b.path)
    except BaseException:
        drop_build(s)
        raise


def flush(s: DatasetStore) -> None:
    if s.batch:
        failpoints.hit("adstore-apply")
        s.writer.apply(s.batch)
        s.batch = []


def drop_build(s: DatasetStore) -> None:
    if s.writer is not None:
        try:
            s.writer.close(flush=False)
        except (StatectlError, OSError):
            pass
        s.writer = None
    if s.build is not None:
        s.build.close()
        s.build = None
    s.batch = []
    s.records = s.nbytes = 0


def drop_builds(stores: list[DatasetStore]) -> None:
    for s in stores:
        drop_build(s)


def end_version(s: DatasetStore, opts: DatasetLoadOptions, progress: ProgressReporter) -> None:
    """Every partition of the store is at a marker: seal and switch to the version, or refuse the marker
    (see the module doc). Either way the markers' offsets go into the cursor and the partitions read on."""
    markers = {p.partition: p.marker for p in s.parts}
    offsets = {p: m.offset for p, m in markers.items()}
    values = {p: marker_value(m, opts) or b"" for p, m in markers.items()}
    parsed = {p: parse_dataset_version(v) for p, v in values.items()}
    first = min(markers)
    where = (f"partition {first} offset {offsets[first]}" if len(markers) == 1
             else "partitions " + ", ".join(f"{p}@{o}" for p, o in sorted(offsets.items())))
    reason = None
    bad = [p for p, n in parsed.items() if n is None]
    if bad:
        reason = (f"its value {show_value(values[bad[0]])} (partition {bad[0]}) is not a dataset version (a decimal "
                  "integer of at least 1)")
    elif len(set(parsed.values())) > 1:
        reason = "the partitions' markers name different dataset versions: " + ", ".join(
            f"{p}: {n}" for p, n in sorted(parsed.items()))
    else:
        dv = parsed[first]
        assert dv is not None
        if s.cursor.dataset_version is not None and dv <= s.cursor.dataset_version:
            reason = (f"it names dataset version {dv}, not above version {s.cursor.dataset_version} sealed before "
                      "(an older or repeated version)")
        elif s.records == 0 and not opts.allow_empty:
            reason = (f"it ends dataset version {dv} without records (none since the previous marker); pass "
                      "--allow-empty to seal empty versions")
    if reason is not None:
        refused = RefusedMarker(first, offsets[first], show_value(values[first]), reason, s.records)
        s.load.refused.append(refused)
        would = "would be " if s.dry is not None else ""
        line = (f"{s.path}: end-of-dataset marker at {opts.topic} {where} {would}refused: {reason}; "
                f"{s.records} record{'s' if s.records != 1 else ''} of it {would}dropped, the current version is "
                f"{'left' if would else 'untouched'}")
        progress.note(line)
        s.refused_lines.append(line)
        drop_build(s)
        s.cursor.offsets.update(offsets)
        if s.dry is None:
            with ChainLock(s.path):
                write_cursor(s.path, s.cursor)
    else:
        _seal(s, opts, parsed[first], offsets, progress)  # type: ignore[arg-type]
    for p in s.parts:
        p.marker = None


def _seal(s: DatasetStore, opts: DatasetLoadOptions, dv: int, offsets: dict[int, int], progress: ProgressReporter) -> None:
    from statectl.local.versions import prune, switch
    from statectl.rocks.sst import scan_digest

    if s.dry is not None:
        number, previous, gone = s.dry.seal(opts.keep_versions)
        s.cursor.offsets.update(offsets)
        s.cursor.dataset_version, s.cursor.store_version = dv, number
        s.load.sealed.append(SealedVersion(number, dv, s.records, None, None,
                                           {SSP(opts.system, opts.topic, p).key(): o for p, o in sorted(offsets.items())},
                                           previous, gone))
        s.records = s.nbytes = 0
        return
    if s.build is None:
        _open_build(s)  # an empty version (allow_empty)
    flush(s)
    s.writer.close(flush=True)
    s.writer = None
    digest = scan_digest(s.build.path)
    ssp_offsets = {SSP(opts.system, opts.topic, p).key(): o for p, o in sorted(offsets.items())}
    manifest = VersionManifest(s.build.number, f"topic:{opts.topic}", s.records, digest,
                               time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "put",
                               {"format": "topic", "topic": opts.topic, "system": opts.system,
                                "partitions": sorted(offsets), "offsets": ssp_offsets, "dataset_version": dv,
                                "end_marker": opts.marker_source()})
    failpoints.hit("adstore-seal")
    with ChainLock(s.path):
        s.build.seal(manifest)
        number = s.build.number
        s.build.close()
        s.build = None
        failpoints.hit("adstore-dataset-switch")
        previous = switch(s.path, number, verify=None)  # just built and sealed by this load
        s.cursor.offsets.update(offsets)
        s.cursor.dataset_version, s.cursor.store_version = dv, number
        write_cursor(s.path, s.cursor)
        gone = prune(s.path, opts.keep_versions)
    js = digest.as_json()
    s.load.sealed.append(SealedVersion(number, dv, s.records, digest.keys, js["checksum"], ssp_offsets, previous,
                                       gone))
    progress.note(f"{s.path}: dataset version {dv} sealed as version {number} ({s.records} records, {digest.keys} "
                  f"keys) and made current" + (f", was {previous}" if previous is not None else ""))
    s.records = s.nbytes = 0
