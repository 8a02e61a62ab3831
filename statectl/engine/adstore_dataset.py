"""adstore: bounded datasets delivered in a stream (seed 003, "Bounded dataset").

A topic carries versions of a dataset, one after the other; each version ends with an end-of-dataset
marker record. The marker is a record carrying the header :data:`END_MARKER_HEADER`
(``statectl-end-of-dataset``), or, with ``end_marker``, a record whose key is that name. Its value (the
header's value, or the record's value) names the version that ends: the dataset version, a decimal
integer of at least 1 that grows along the topic (``"1"``, ``"2"``, ``"20261125"``). The marker itself
is never an entry of the store.

The records of the next version go into a new version of the store, built in a temporary dir of its
versions dir (local.versions.VersionBuild, as ``--from-file`` builds one), starting empty: puts and
deletes as a topic load applies them (formats.adstore.KeyValueSpec). At the marker the version is sealed
with the manifest ``--from-file`` versions have (source ``topic:<topic>``; ``extra``: topic, system,
partitions, the marker's offset per partition, the dataset version) and switched to atomically; the
``keep_versions`` newest are kept. ``adstore versions`` and ``adstore switch`` (rollback) work on them as
on any version.

Stores: partitioned (``Partition k`` holds partition k of the topic) or ``broadcast`` (one store over
every partition). A store is sealed when every one of its partitions has seen the marker of the version
(seed 003: a consistent fraction of the snapshot per task); a partition that has seen it is not read on
until then (what follows belongs to the next version).

Locks: a load holds ``<store dir>.adstore-dataset.lock`` beside the store dir for its whole run (a second
loader of the store exits 11), and the store's local.versions.StoreLock (``<store dir>.adstore.lock``)
only while it changes the version chain (starts a build; seals, switches, prunes and writes the cursor;
completes an interrupted switch), waiting up to CHAIN_WAIT_S for it while an ``adstore switch`` or a
``--from-file`` load holds it. So ``adstore switch`` (a rollback) works while ``--follow`` runs; the next
version sealed is switched to as usual.

Where a store stands (per store): the cursor file :data:`CURSOR` in its versions dir
(the partitions a version of it holds: a load with another layout is refused; the offsets of the last
marker handled, per partition, the newest dataset version sealed, and the store
version made current for it), written after each switch, and the manifest of each sealed version. A load
resumes after the last marker handled: a version killed half built is removed (its build dir dies with
its pid) and rebuilt from its first record, so a version is sealed with exactly its records; a sealed
version is never rebuilt; a kill between the seal and the switch is completed by the next load (it
switches to the version it finds sealed past the cursor). Nothing is current until sealed.

Bad markers are refused, never sealed, and the current version is left as it is: a marker value that is
not a dataset version (garbage), one not above the newest version sealed (an older or repeated version),
partitions of one store whose markers name different versions, and a marker that ends a version without
records (no record since the previous marker) unless ``allow_empty`` (as ``--from-file`` refuses an empty
dataset). The records of a refused version are dropped, the marker's offsets recorded (what follows is
the next version: nothing of it is lost), and the load goes on; each refusal is a one-line note in
``DatasetLoadResult.refused`` (the CLI exits 3).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl import failpoints
from statectl.engine.adstore_common import AdstoreExtractError, _check_spec
from statectl.errors import DiskFullError, NotFoundError, StatectlError, UsageError, is_disk_full
from statectl.formats.adstore import MANIFEST, AdRecord, ExtractError, KeyValueSpec, VersionManifest
from statectl.formats.checkpoint import SSP
from statectl.fsutil import chown_tree, make_dirs, owner_of, write_atomic
from statectl.kafka.client import DEFAULT_TIMEOUT_S, KafkaSecurity, OffsetOutOfRange
from statectl.local.layout import store_dir
from statectl.progress import NullProgress, ProgressReporter

END_MARKER_HEADER = "statectl-end-of-dataset"
CURSOR = "DATASET-CURSOR.json"  # in a store's versions dir
BATCH = 10_000  # entries per WriteBatch into a version being built
MAX_DATASET_VERSION = (1 << 63) - 1
LOADER_LOCK_SUFFIX = ".adstore-dataset.lock"  # beside the store dir (never "<store dir>-...": Samza deletes those)
CHAIN_WAIT_S = 600.0  # how long a seal waits for the StoreLock an adstore switch or a --from-file load holds


@dataclass(frozen=True)
class DatasetLoadOptions:
    """Load the dataset versions ``topic`` carries into ``store`` under ``state_dir``: partitioned (store
    ``Partition k`` for each of ``partitions``, default all) or ``broadcast`` into ``store_dir`` (default:
    the store dir of ``task``). ``end_marker``: the record key of a marker (None: the header
    END_MARKER_HEADER). ``keep_versions``: sealed versions kept per store. ``allow_empty``: a version
    without records is sealed (by default its marker is refused). ``follow``: keep consuming until
    ``stop``; each marker seals and switches the next version. ``dry_run``: write nothing and take no lock;
    the result says what the load would do with the records there now (see load_dataset_versions)."""

    bootstrap: str
    topic: str
    store: str
    state_dir: Path | None = None
    broadcast: bool = False
    task: str = "Partition 0"
    store_dir: Path | None = None
    partitions: tuple[int, ...] | None = None
    spec: KeyValueSpec = KeyValueSpec()
    end_marker: str | None = None
    keep_versions: int = 2
    allow_empty: bool = False
    follow: bool = False
    system: str = "kafka"
    security: KafkaSecurity | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    dry_run: bool = False

    def validate(self) -> None:
        if not self.bootstrap:
            raise UsageError("adstore load --topic needs Kafka brokers", hint="pass --kafka HOST:PORT[,..]")
        if not self.topic:
            raise UsageError("adstore load --topic needs a topic name")
        if not self.store:
            raise UsageError("adstore load needs --store")
        if self.store_dir is None and self.state_dir is None:
            raise UsageError("adstore load needs --state-dir (or --store-dir with --broadcast)")
        if self.store_dir is not None and not self.broadcast:
            raise UsageError("--store-dir names one store: use it with --broadcast, or pass --state-dir")
        if self.keep_versions < 1:
            raise UsageError("--keep-versions must be at least 1")
        if self.end_marker is not None and not self.end_marker:
            raise UsageError("--end-marker needs a record key")
        if not self.system or "." in self.system:
            raise UsageError(f"invalid system name {self.system!r}")
        if self.partitions is not None and any(p < 0 for p in self.partitions):
            raise UsageError("partitions must be 0 or more")
        if self.state_dir is not None:
            store_dir(Path(self.state_dir), self.store, self.task)
        _check_spec(self.spec, topic=True)

    def marker_source(self) -> str:
        return f"key {self.end_marker}" if self.end_marker is not None else f"header {END_MARKER_HEADER}"


@dataclass
class SealedVersion:
    """A version this load sealed and made current: its store ``version``, the ``dataset_version`` its
    marker named, its ``records`` (puts and deletes applied), ``keys`` and ``checksum`` (its manifest's),
    and the marker's offset per partition. A dry run knows no ``keys`` or ``checksum`` (None): it counts
    records and builds nothing."""

    version: int
    dataset_version: int
    records: int
    keys: int | None
    checksum: str | None
    offsets: dict[str, int]
    previous: int | None
    deleted_versions: list[int] = field(default_factory=list)


@dataclass
class RefusedMarker:
    """A marker not honoured (see the module doc): where it is and why; ``records`` of its version dropped."""

    partition: int
    offset: int
    value: str
    reason: str
    records: int = 0


@dataclass
class DatasetStoreLoad:
    """One store: the versions sealed, the markers refused, the current ``version`` as the load left it, and
    ``pending_records`` of a version begun but not ended when the load stopped (not kept: the next load
    builds that version again from its first record). ``offsets``: the last marker handled per partition."""

    store_dir: str
    partitions: list[int]
    version: int | None = None
    dataset_version: int | None = None
    sealed: list[SealedVersion] = field(default_factory=list)
    refused: list[RefusedMarker] = field(default_factory=list)
    pending_records: int = 0
    records: int = 0
    bytes: int = 0
    offsets: dict[str, int | None] = field(default_factory=dict)


@dataclass
class DatasetLoadResult:
    """``records`` applied (markers excluded) and their key + value ``bytes``; ``versions_sealed`` over
    every store; ``version`` the current version when every store has the same one; ``refused`` one line
    per refused marker; ``bootstrapped``: every partition was read to the end it had at start."""

    topic: str
    end_marker: str
    records: int = 0
    bytes: int = 0
    skipped: int = 0
    versions_sealed: int = 0
    version: int | None = None
    duration_s: float = 0.0
    offsets: dict[str, int | None] = field(default_factory=dict)
    stores: list[DatasetStoreLoad] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    bootstrapped: bool = False
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False


@dataclass
class _Cursor:
    """Where a store stands in the topic (CURSOR): ``offsets`` of the last marker handled per partition,
    the newest ``dataset_version`` sealed, and ``store_version``, the version made current for it."""

    topic: str
    system: str
    offsets: dict[int, int] = field(default_factory=dict)
    dataset_version: int | None = None
    store_version: int | None = None
    partitions: list[int] | None = None  # the partitions a version of the store holds (None: not known yet)

    def to_json(self) -> str:
        return json.dumps({"topic": self.topic, "system": self.system, "partitions": self.partitions,
                           "offsets": {str(p): o for p, o in sorted(self.offsets.items())},
                           "dataset_version": self.dataset_version, "store_version": self.store_version},
                          indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "_Cursor":
        try:
            obj = json.loads(text)
            dv, sv, ps = obj.get("dataset_version"), obj.get("store_version"), obj.get("partitions")
            return cls(str(obj["topic"]), str(obj["system"]), {int(p): int(o) for p, o in obj["offsets"].items()},
                       None if dv is None else int(dv), None if sv is None else int(sv),
                       None if ps is None else sorted(int(p) for p in ps))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"malformed {CURSOR}: {e}") from None


@dataclass
class _Part:
    partition: int
    next_offset: int | None  # where this load starts reading (None: the log start)
    reader: Any = None
    gen: Any = None
    consumer: Any = None
    buf: list[Any] = field(default_factory=list)
    marker: Any = None  # the marker record this partition stopped at (the version is not sealed yet)
    exhausted: bool = False


@dataclass
class _Store:
    path: Path
    parts: list[_Part]
    load: DatasetStoreLoad
    cursor: _Cursor
    build: Any = None  # local.versions.VersionBuild of the version being built
    writer: Any = None
    batch: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    records: int = 0  # of the version being built
    nbytes: int = 0
    refused_lines: list[str] = field(default_factory=list)
    dry: "_DryChain | None" = None  # a dry run's version chain, as the load would leave it


@dataclass
class _DryChain:
    """A dry run's view of a store's versions (local.versions' rules, nothing written): the number the next
    build gets, the current version, the versions with a manifest and the sound ones among them."""

    next: int
    current: int | None
    sealed: list[int]
    sound: list[int]

    @classmethod
    def of(cls, store: Path) -> "_DryChain":
        from statectl.local.versions import current_version, list_versions, next_number

        versions = list_versions(store)
        return cls(next_number(store, live_builds_only=True), current_version(store),
                   [v.number for v in versions if os.path.lexists(v.path / MANIFEST)],
                   [v.number for v in versions if v.manifest is not None and v.problem is None])

    def seal(self, keep: int) -> tuple[int, int | None, list[int]]:
        """(number, previous current, versions pruned) of the next version sealed and switched to (prune's
        rule: the ``keep`` newest sound versions and the current one stay)."""
        number, previous = self.next, self.current
        kept = set((self.sound + [number])[-keep:]) | {number}
        gone = [v for v in self.sealed if v not in kept]
        self.sealed = [v for v in self.sealed if v in kept] + [number]
        self.sound = [v for v in self.sound if v in kept] + [number]
        self.next, self.current = number + 1, number
        return number, previous, gone


def load_dataset_versions(opts: DatasetLoadOptions, *, stop: threading.Event | None = None,
                          progress: ProgressReporter | None = None) -> DatasetLoadResult:
    """Read the topic's dataset versions into versioned stores (see the module doc): seal and switch to
    each version whose marker every partition of a store has seen; with ``follow`` go on until ``stop``.

    Idempotent: a load run again resumes after the last marker handled and never rebuilds a sealed
    version. Raises UsageError for bad options, a target that is not a versioned adstore (a topic's or a
    job's store dir), or a store whose cursor names another topic; NotFoundError (exit 10) for a missing
    topic or partition; LockHeldError (exit 11) while another adstore load or switch runs on a store;
    AdstoreExtractError (exit 1) for a record the spec cannot handle (the version being built is dropped;
    the current one is untouched); StatectlError when the recorded offsets fell off the topic or the
    brokers cannot be reached; DiskFullError (exit 1). Bad markers are not errors: they are refused and
    reported in the result (see the module doc). ``stop`` ends the load between batches; a version not yet
    sealed is dropped then.

    With ``opts.dry_run`` nothing is written and no lock taken (a load running meanwhile is not waited for):
    the records there now are read to the end offsets taken at start (``follow`` reads no further) and
    counted, the markers judged as the load judges them, and the result lists the versions the load would
    seal (their numbers, previous and pruned versions; ``keys`` and ``checksum`` None) and the markers it
    would refuse. It raises what the load raises (LockHeldError too: another loader of a store runs), but
    DiskFullError."""
    opts.validate()
    if opts.dry_run and opts.follow:
        from dataclasses import replace

        opts = replace(opts, follow=False)
    progress = progress or NullProgress()
    stop = stop or threading.Event()
    began = time.monotonic()
    from contextlib import ExitStack

    from statectl.kafka.client import open_consumer, partition_count
    from statectl.local.versions import current_version

    result = DatasetLoadResult(opts.topic, opts.marker_source(), dry_run=opts.dry_run)
    consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
    stores: list[_Store] = []
    with ExitStack() as stack:
        stack.callback(consumer.close)
        n = partition_count(consumer, opts.topic, opts.bootstrap)
        if n is None:
            raise NotFoundError(f"topic {opts.topic} does not exist on {opts.bootstrap}",
                                hint="check the topic name and --kafka")
        parts = sorted(set(opts.partitions)) if opts.partitions is not None else list(range(n))
        missing = [p for p in parts if p >= n]
        if missing:
            raise NotFoundError(f"topic {opts.topic} has {n} partition{'s' if n != 1 else ''}; there is no "
                                f"partition {missing[0]}", hint=f"pass partitions between 0 and {n - 1}")
        layout = _layout(opts, parts)
        for path, _ in layout:
            current_version(path)  # refuses a plain store dir (a topic's or a job's) before anything is written
            if os.path.lexists(path) and not path.is_symlink():
                raise UsageError(f"{path} is not a versioned adstore")
        for path, _ in layout:
            if opts.dry_run:
                _loader_lock(path).check_free()  # as the load would refuse, taking nothing
            else:
                stack.enter_context(_loader_lock(path))
        extract = opts.spec.record_extractor() if (opts.spec.extractor or opts.spec.key_field
                                                   or opts.spec.value_field) else None
        try:
            for path, ps in layout:
                stores.append(_resume(path, ps, opts, consumer, progress))
            stack.callback(_drop_builds, stores)
            _run(stores, opts, extract, stop, progress, result)
        except ExtractError as e:
            raise UsageError(str(e)) from None
        except Exception as e:  # RocksDB's own "IO error: No space left on device" is no OSError
            if is_disk_full(e) and not isinstance(e, DiskFullError):
                raise DiskFullError(f"no space left on device loading {opts.topic} into {layout[0][0].parent}; the "
                                    "version being built is dropped, the current one is untouched",
                                    hint=f"free some space in {layout[0][0].parent}") from e
            raise
        finally:
            for s in stores:
                for part in s.parts:
                    if part.gen is not None:
                        part.gen.close()
                    if part.consumer is not None:
                        part.consumer.close()
    for s in stores:
        s.load.version = s.dry.current if s.dry is not None else current_version(s.path)
        s.load.dataset_version = s.cursor.dataset_version
        s.load.offsets = {SSP(opts.system, opts.topic, p.partition).key(): s.cursor.offsets.get(p.partition)
                          for p in s.parts}
        result.offsets.update(s.load.offsets)
        result.stores.append(s.load)
        result.records += s.load.records
        result.bytes += s.load.bytes
        result.versions_sealed += len(s.load.sealed)
        result.refused += s.refused_lines
    current = {s.load.version for s in stores}
    result.version = current.pop() if len(current) == 1 else None
    result.duration_s = round(time.monotonic() - began, 3)
    result.notes = list(getattr(progress, "notes", [])) + result.notes
    return result


def _loader_lock(store: Path) -> Any:
    """The lock one dataset loader of ``store`` holds for its whole run (LockHeldError, exit 11, when another
    has it): local.versions.StoreLock's flock on another file beside the store dir."""
    from statectl.local.versions import StoreLock

    lock = StoreLock(store)
    lock.path = Path(store).with_name(Path(store).name + LOADER_LOCK_SUFFIX)
    return lock


class _Chain:
    """The store's StoreLock for one change of its version chain, waited for (up to CHAIN_WAIT_S) while an
    ``adstore switch`` or a ``--from-file`` load holds it; LockHeldError (exit 11) after that."""

    def __init__(self, store: Path):
        from statectl.local.versions import StoreLock

        self.lock = StoreLock(store)

    def __enter__(self) -> "_Chain":
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


def _layout(opts: DatasetLoadOptions, parts: list[int]) -> list[tuple[Path, list[int]]]:
    if opts.broadcast:
        path = Path(opts.store_dir) if opts.store_dir is not None else store_dir(Path(opts.state_dir), opts.store,
                                                                                  opts.task)
        return [(path.absolute(), parts)]
    return [(store_dir(Path(opts.state_dir), opts.store, f"Partition {p}").absolute(), [p]) for p in parts]


def cursor_path(store: Path) -> Path:
    """The cursor file of a store fed by dataset versions (in its versions dir)."""
    from statectl.local.versions import versions_dir

    return versions_dir(Path(store)) / CURSOR


def _read_cursor(store: Path, opts: DatasetLoadOptions) -> _Cursor:
    path = cursor_path(store)
    if not path.exists():
        return _Cursor(opts.topic, opts.system)
    try:
        cursor = _Cursor.from_json(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise StatectlError(f"{path} cannot be read ({e}): refusing to guess where the dataset stands",
                            hint="restore the file, or load into another --store") from None
    if (cursor.system, cursor.topic) != (opts.system, opts.topic):
        raise UsageError(f"{store} holds dataset versions of {cursor.system}.{cursor.topic}, not of "
                         f"{opts.system}.{opts.topic}", hint="load into another --store")
    return cursor


def _write_cursor(store: Path, cursor: _Cursor) -> None:
    path = cursor_path(store)
    owner = owner_of(store.parent)  # run as root: the job's user's, as local.versions makes the versions dir
    make_dirs(path.parent, owner)
    write_atomic(path, cursor.to_json())
    chown_tree(path, owner)


def _resume(path: Path, ps: list[int], opts: DatasetLoadOptions, consumer: Any,
            progress: ProgressReporter) -> _Store:
    """Where the store stands: its cursor, completed by a version sealed after it (a load killed between
    the seal and the cursor: switched to now if it never was). Checks the offsets are still on the topic."""
    from statectl.kafka.tails import check_in_range
    from statectl.local.versions import current_version, list_versions, remove_dead_builds, switch

    cursor = _read_cursor(path, opts)
    dry = _DryChain.of(path) if opts.dry_run else None
    with contextlib.nullcontext() if dry else _Chain(path):
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
                _write_cursor(path, cursor)
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
        parts.append(_Part(p, nxt))
    return _Store(path, parts, DatasetStoreLoad(str(path), list(ps)), cursor, dry=dry)


def _marker_value(r: Any, opts: DatasetLoadOptions) -> bytes | None:
    """The marker's value when record ``r`` is an end-of-dataset marker, else None (b"" counts as a value)."""
    if opts.end_marker is not None:
        if r.key == opts.end_marker.encode():
            return r.value if r.value is not None else b""
        return None
    for k, v in r.headers or ():
        if k == END_MARKER_HEADER:
            return v if v is not None else b""
    return None


def parse_dataset_version(value: bytes) -> int | None:
    """The dataset version a marker names: a decimal integer of at least 1 (surrounding blanks allowed);
    None for anything else."""
    try:
        text = value.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    if not text.isdigit() or not text.isascii():
        return None
    n = int(text)
    return n if 1 <= n <= MAX_DATASET_VERSION else None


def _show(value: bytes) -> str:
    text = value[:40].decode("utf-8", "backslashreplace")
    return repr(text + ("..." if len(value) > 40 else ""))


def _run(stores: list[_Store], opts: DatasetLoadOptions, extract: Any, stop: threading.Event,
         progress: ProgressReporter, result: DatasetLoadResult) -> None:
    """Round-robin over every partition of every store: apply records, stop a partition at its marker,
    seal a store once all its partitions are at a marker. Without ``follow``, ends when every partition
    is read to the end it had at start (or is at a marker the others of its store have not reached)."""
    from statectl.kafka.client import PartitionReader, open_consumer

    nparts = sum(len(s.parts) for s in stores)
    poll_ms = max(20, 300 // max(1, nparts))
    for s in stores:
        for part in s.parts:
            part.consumer = open_consumer(opts.bootstrap, timeout_s=opts.timeout_s, security=opts.security)
            part.reader = PartitionReader(part.consumer, opts.topic, part.partition, opts.bootstrap,
                                          empty_poll_ms=poll_ms)
            part.reader.seek(part.next_offset)
            part.gen = part.reader.batches(follow=opts.follow)
    if opts.follow:
        progress.note(f"following the dataset versions of {opts.topic} (markers: {opts.marker_source()}) until stopped")
    while not stop.is_set():
        busy = False
        for s in stores:
            for part in s.parts:
                if part.marker is not None or part.exhausted:
                    continue
                if not part.buf:
                    try:
                        part.buf = list(next(part.gen))
                    except StopIteration:
                        part.exhausted = True
                        continue
                if part.buf:
                    busy = True
                    _consume(s, part, opts, extract, result)
                if stop.is_set():
                    break
            if all(p.marker is not None for p in s.parts):
                _end_version(s, opts, progress)
                busy = True
            if stop.is_set():
                break
        if not result.bootstrapped and all(p.exhausted or p.marker is not None or (p.reader.caught_up and not p.buf)
                                           for s in stores for p in s.parts):
            result.bootstrapped = True  # every partition read to its end (or to a marker it waits at)
        if not opts.follow and not busy and result.bootstrapped:
            break
    for s in stores:
        s.load.pending_records = s.records
        if s.records or s.build is not None:
            waiting = [p.partition for p in s.parts if p.marker is None]
            progress.note(f"{s.path}: {s.records} records of the next dataset version are not kept: its marker "
                          f"has not reached partition{'s' if len(waiting) != 1 else ''} "
                          f"{', '.join(map(str, waiting))} yet (the next load builds it again from its start)")


def _consume(s: _Store, part: _Part, opts: DatasetLoadOptions, extract: Any, result: DatasetLoadResult) -> None:
    """Apply the partition's buffered records up to its marker (kept in ``part.marker``, what follows it
    stays buffered for the next version)."""
    buf, part.buf = part.buf, []
    for i, r in enumerate(buf):
        if _marker_value(r, opts) is not None:
            part.marker = r
            part.buf = buf[i + 1:]
            break
        if extract is None:
            if r.key is None:
                result.skipped += 1
                continue
            kv = (r.key, r.value)
        else:
            try:
                kv = extract(AdRecord(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value))
            except Exception as e:  # noqa: BLE001 - the user's extractor: any error names the record
                raise AdstoreExtractError(
                    f"topic {opts.topic} partition {r.partition} offset {r.offset}: cannot extract key and value "
                    f"({opts.spec.describe()}): {type(e).__name__ + ': ' if not isinstance(e, ExtractError) else ''}"
                    f"{e}", hint="fix the record or the extractor; the version being built was dropped, the "
                                 "current one is untouched") from None
            if kv is None:
                result.skipped += 1
                continue
        _put(s, kv[0], kv[1])
        if len(s.batch) >= BATCH:
            _flush(s)
    _flush(s)  # one WriteBatch per poll at most, as a topic load writes


def _put(s: _Store, key: bytes, value: bytes | None) -> None:
    if s.dry is None:  # a dry run counts the record and keeps nothing
        if s.build is None:
            _open_build(s)
        s.batch.append((key, value))
    s.records += 1
    nbytes = len(key) + (len(value) if value is not None else 0)
    s.nbytes += nbytes
    s.load.records += 1
    s.load.bytes += nbytes


def _open_build(s: _Store) -> None:
    from statectl.local.versions import VersionBuild
    from statectl.rocks.writer import StoreWriter

    b = VersionBuild(s.path)
    with _Chain(s.path):  # the build's number is picked under the lock
        b.open()
    s.build = b
    try:
        s.writer = StoreWriter(b.path)
    except BaseException:
        _drop_build(s)
        raise


def _flush(s: _Store) -> None:
    if s.batch:
        failpoints.hit("adstore-apply")
        s.writer.apply(s.batch)
        s.batch = []


def _drop_build(s: _Store) -> None:
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


def _drop_builds(stores: list[_Store]) -> None:
    for s in stores:
        _drop_build(s)


def _end_version(s: _Store, opts: DatasetLoadOptions, progress: ProgressReporter) -> None:
    """Every partition of the store is at a marker: seal and switch to the version, or refuse the marker
    (see the module doc). Either way the markers' offsets go into the cursor and the partitions read on."""
    markers = {p.partition: p.marker for p in s.parts}
    offsets = {p: m.offset for p, m in markers.items()}
    values = {p: _marker_value(m, opts) or b"" for p, m in markers.items()}
    parsed = {p: parse_dataset_version(v) for p, v in values.items()}
    first = min(markers)
    where = (f"partition {first} offset {offsets[first]}" if len(markers) == 1
             else "partitions " + ", ".join(f"{p}@{o}" for p, o in sorted(offsets.items())))
    reason = None
    bad = [p for p, n in parsed.items() if n is None]
    if bad:
        reason = (f"its value {_show(values[bad[0]])} (partition {bad[0]}) is not a dataset version (a decimal "
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
        refused = RefusedMarker(first, offsets[first], _show(values[first]), reason, s.records)
        s.load.refused.append(refused)
        would = "would be " if s.dry is not None else ""
        line = (f"{s.path}: end-of-dataset marker at {opts.topic} {where} {would}refused: {reason}; "
                f"{s.records} record{'s' if s.records != 1 else ''} of it {would}dropped, the current version is "
                f"{'left' if would else 'untouched'}")
        progress.note(line)
        s.refused_lines.append(line)
        _drop_build(s)
        s.cursor.offsets.update(offsets)
        if s.dry is None:
            with _Chain(s.path):
                _write_cursor(s.path, s.cursor)
    else:
        _seal(s, opts, parsed[first], offsets, progress)  # type: ignore[arg-type]
    for p in s.parts:
        p.marker = None


def _seal(s: _Store, opts: DatasetLoadOptions, dv: int, offsets: dict[int, int], progress: ProgressReporter) -> None:
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
    _flush(s)
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
    with _Chain(s.path):
        s.build.seal(manifest)
        number = s.build.number
        s.build.close()
        s.build = None
        failpoints.hit("adstore-dataset-switch")
        previous = switch(s.path, number, verify=None)  # just built and sealed by this load
        s.cursor.offsets.update(offsets)
        s.cursor.dataset_version, s.cursor.store_version = dv, number
        _write_cursor(s.path, s.cursor)
        gone = prune(s.path, opts.keep_versions)
    js = digest.as_json()
    s.load.sealed.append(SealedVersion(number, dv, s.records, digest.keys, js["checksum"], ssp_offsets, previous,
                                       gone))
    progress.note(f"{s.path}: dataset version {dv} sealed as version {number} ({s.records} records, {digest.keys} "
                  f"keys) and made current" + (f", was {previous}" if previous is not None else ""))
    s.records = s.nbytes = 0
