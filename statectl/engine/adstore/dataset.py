"""adstore load --dataset-versions: bounded datasets delivered in a stream; the options, results and
where a store stands (its cursor). engine.adstore.dataset_load runs the load, engine.adstore.dataset_chain
builds, seals and switches the versions.

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
(a consistent fraction of the snapshot per task); a partition that has seen it is not read on
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

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statectl.engine.adstore.common import TopicSourceOptions
from statectl.errors import UsageError
from statectl.formats.adstore import MANIFEST

END_MARKER_HEADER = "statectl-end-of-dataset"
CURSOR = "DATASET-CURSOR.json"  # in a store's versions dir
BATCH = 10_000  # entries per WriteBatch into a version being built
MAX_DATASET_VERSION = (1 << 63) - 1
LOADER_LOCK_SUFFIX = ".adstore-dataset.lock"  # beside the store dir (never "<store dir>-...": Samza deletes those)
CHAIN_WAIT_S = 600.0  # how long a seal waits for the StoreLock an adstore switch or a --from-file load holds


@dataclass(frozen=True)
class DatasetLoadOptions(TopicSourceOptions):
    """Load the dataset versions ``topic`` carries into versioned stores, as TopicSourceOptions says.
    ``end_marker``: the record key of a marker (None: the header END_MARKER_HEADER). ``keep_versions``:
    sealed versions kept per store. ``allow_empty``: a version without records is sealed (by default its
    marker is refused). ``follow``: keep consuming until ``stop``; each marker seals and switches the next
    version. ``dry_run``: write nothing and take no lock; the result says what the load would do with the
    records there now (see engine.adstore.dataset_load.load_dataset_versions)."""

    end_marker: str | None = None
    keep_versions: int = 2
    allow_empty: bool = False
    dry_run: bool = False

    def validate(self) -> None:
        super().validate()
        if self.keep_versions < 1:
            raise UsageError("--keep-versions must be at least 1")
        if self.end_marker is not None and not self.end_marker:
            raise UsageError("--end-marker needs a record key")

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
class Cursor:
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
    def from_json(cls, text: str) -> "Cursor":
        try:
            obj = json.loads(text)
            dv, sv, ps = obj.get("dataset_version"), obj.get("store_version"), obj.get("partitions")
            return cls(str(obj["topic"]), str(obj["system"]), {int(p): int(o) for p, o in obj["offsets"].items()},
                       None if dv is None else int(dv), None if sv is None else int(sv),
                       None if ps is None else sorted(int(p) for p in ps))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"malformed {CURSOR}: {e}") from None


@dataclass
class DatasetPart:
    """One partition a dataset load reads: from where, its reader, the records polled and not yet applied,
    and the marker it stopped at."""

    partition: int
    next_offset: int | None  # where this load starts reading (None: the log start)
    reader: Any = None
    gen: Any = None
    consumer: Any = None
    buf: list[Any] = field(default_factory=list)
    marker: Any = None  # the marker record this partition stopped at (the version is not sealed yet)
    exhausted: bool = False


@dataclass
class DatasetStore:
    """One versioned store a dataset load fills: its partitions, where it stands (its cursor), the version
    being built and its writer, and the refusals so far."""

    path: Path
    parts: list[DatasetPart]
    load: DatasetStoreLoad
    cursor: Cursor
    build: Any = None  # local.versions.VersionBuild of the version being built
    writer: Any = None
    batch: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    records: int = 0  # of the version being built
    nbytes: int = 0
    refused_lines: list[str] = field(default_factory=list)
    dry: "DryChain | None" = None  # a dry run's version chain, as the load would leave it


@dataclass
class DryChain:
    """A dry run's view of a store's versions (local.versions' rules, nothing written): the number the next
    build gets, the current version, the versions with a manifest and the sound ones among them."""

    next: int
    current: int | None
    sealed: list[int]
    sound: list[int]

    @classmethod
    def of(cls, store: Path) -> "DryChain":
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


def marker_value(r: Any, opts: DatasetLoadOptions) -> bytes | None:
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


def show_value(value: bytes) -> str:
    """A marker's value as a refusal names it: its first 40 characters, quoted."""
    text = value[:40].decode("utf-8", "backslashreplace")
    return repr(text + ("..." if len(value) > 40 else ""))


def cursor_path(store: Path) -> Path:
    """The cursor file of a store fed by dataset versions (in its versions dir)."""
    from statectl.local.versions import versions_dir

    return versions_dir(Path(store)) / CURSOR
