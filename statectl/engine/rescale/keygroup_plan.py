"""The plan of a key-group rescale (Flink's ClipDB + IngestDB, on snapshots): which source files each target
snapshot lists, copied server-side and unread, which key ranges it clips off with range deletions, and which
sources the executors read whole instead.

Each source task ``i`` of ``N`` owns key groups O_i, each target ``t`` of ``M`` owns R_t
(statectl.formats.keygroups). For target ``t`` and source ``i`` with S = O_i ∩ R_t not empty, C_i is S's key
range, [prefix of its first group, prefix of the group after its last). Target ``t`` lists:

- every live file of every such source whose key range (its MANIFEST's smallest and largest keys, a range
  deletion's end exclusive) reaches into C_i, at its level with its sequence numbers: within C_i the target
  reads what the source read. A file two sources list alike (the same bytes, level, key range, sequence
  numbers and epoch: both copies of one file, as the targets of an earlier rescale hold them) is listed once;
- range deletions of the key groups below and above R_t that the listed files reach into, in files of their
  own at level 0, at sequence numbers above every listed file's (statectl.rocks.rangedel): the target reads
  none of what its files hold outside R_t, and compaction drops it.

A listed file that reaches into C_j of another source ``j`` of the target, without being ``j``'s too, would
put keys or deletions of ``i`` among ``j``'s, which no range deletion can separate (both sources' sequence
numbers count from their own stores): every source listing such a file is read whole by the executors
instead, its keys in C_i rewritten (as Flink copies a state handle whose files exceed its key groups through
a temporary instance), until no listed file does. A source whose snapshot has a non-empty WAL is read whole
too (its MANIFEST does not say what the WAL holds). The sources of a target never share a level's key range
then: a file reaching out of R_t on one side passes through every C_j between.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from statectl.errors import StatectlError
from statectl.formats.keygroups import KeyGroupError, group_bound, key_group, task_range
from statectl.rocks.manifest import RANGE_DELETION, LiveFile, Manifest


class KeyGroupStoreError(StatectlError):
    """A source snapshot that is not a key-group store of the given key-group count (exit 1)."""


@dataclass(frozen=True)
class SourceFile:
    source: int
    file: LiveFile
    checksum: int  # the snapshot index's CRC32 of the file

    @property
    def size(self) -> int:
        return self.file.size

    @property
    def identity(self) -> tuple:
        """What two sources' files share when they are copies of one file (their numbers may differ)."""
        f = self.file
        return (f.level, f.size, f.smallest, f.largest, f.smallest_seqno, f.largest_seqno, f.epoch, f.custom,
                self.checksum)


@dataclass
class TargetPlan:
    task: int
    first: int  # its key groups, inclusive
    last: int
    copies: list[SourceFile] = field(default_factory=list)  # one per identity
    clips: list[tuple[bytes, bytes]] = field(default_factory=list)  # key ranges [start, end) deleted
    whole: list[int] = field(default_factory=list)  # sources read whole that reach into this target

    @property
    def bytes_copied(self) -> int:
        return sum(f.size for f in self.copies)


@dataclass
class KeyGroupPlan:
    groups: int
    targets: list[TargetPlan]
    whole: set[int]


def plan(manifests: list[Manifest | None], checksums: list[dict[str, int]], from_tasks: int, to_tasks: int,
         groups: int) -> KeyGroupPlan:
    """The plan for sources ``manifests`` (per source task in order; None: read it whole) whose files have the
    CRC32s ``checksums`` (per source, file name -> CRC32). Raises KeyGroupStoreError for a file whose smallest
    or largest key (other than a range deletion's bound) has no valid key-group prefix."""
    files = [None if m is None else _source_files(i, m, checksums[i], groups) for i, m in enumerate(manifests)]
    whole = {i for i, fs in enumerate(files) if fs is None}
    while True:
        targets, mixed = [], set()
        for t in range(to_tasks):
            target, bad = _target(t, files, whole, from_tasks, to_tasks, groups)
            targets.append(target)
            mixed |= bad
        if not mixed:
            return KeyGroupPlan(groups, targets, whole)
        whole |= mixed


def _source_files(i: int, m: Manifest, checksums: dict[str, int], groups: int) -> list[SourceFile]:
    """Source ``i``'s live files, each with its CRC32 and an epoch (a MANIFEST of a RocksDB before epochs
    gets the ones RocksDB infers, L0 by sequence numbers: one per file, the same in every target)."""
    from dataclasses import replace

    out = []
    live = m.live_files
    if any(f.epoch == 0 for f in live):
        l0 = sorted((f for f in live if f.level == 0), key=lambda f: (f.largest_seqno, f.smallest_seqno, f.number))
        epochs = {f.number: n for n, f in enumerate(l0, start=2)}
        live = [replace(f, epoch=epochs.get(f.number, 1)) for f in live]
    for f in live:
        for bound in (f.smallest, f.largest):
            if bound[-8] != RANGE_DELETION:  # a range deletion's bound may be any key, e.g. past every group
                try:
                    key_group(bound[:-8], groups)
                except KeyGroupError as e:
                    raise KeyGroupStoreError(f"source task {i}: SST {f.name}: {e}",
                                             hint="is --key-groups the store's number of key groups (Flink's max "
                                                  "parallelism)? Without key-group prefixes, leave --key-groups "
                                                  "out") from None
        out.append(SourceFile(i, f, checksums.get(f.name, 0)))
    return out


def _target(t: int, files: list[list[SourceFile] | None], whole: set[int], from_tasks: int, to_tasks: int,
            groups: int) -> tuple[TargetPlan, set[int]]:
    """Target ``t``'s plan with sources ``whole`` read whole, and the sources listing a file that reaches into
    another source's key range of the target (which must be read whole)."""
    first, last = task_range(t, to_tasks, groups)
    target = TargetPlan(t, first, last)
    parts = []  # (source, C_i's start, end)
    for i in range(from_tasks):
        a, b = task_range(i, from_tasks, groups)
        a, b = max(a, first), min(b, last)
        if a <= b:
            parts.append((i, group_bound(a, groups), group_bound(b + 1, groups)))
    listed: dict[tuple, tuple[SourceFile, set[int]]] = {}
    for i, start, end in parts:
        if i in whole:
            target.whole.append(i)
            continue
        for f in files[i] or ():
            if f.file.meets(start, end):
                listed.setdefault(f.identity, (f, set()))[1].add(i)
    mixed: set[int] = set()
    for f, owners in listed.values():
        if any(j not in owners and f.file.meets(start, end) for j, start, end in parts):
            mixed |= owners
    target.copies = [f for f, _ in listed.values()]
    low, high = group_bound(first, groups), group_bound(last + 1, groups)
    if first > 0 and any(f.file.meets(group_bound(0, groups), low) for f in target.copies):
        target.clips.append((group_bound(0, groups), low))
    if last < groups - 1 and any(f.file.meets(high, group_bound(groups, groups)) for f in target.copies):
        target.clips.append((high, group_bound(groups, groups)))
    return target, mixed


def check_target(files: list[LiveFile], clips: list[tuple[bytes, bytes]], first: int, last: int,
                 groups: int) -> list[str]:
    """Problems of a target's file set: a file reaching out of key groups ``first..last`` where no range
    deletion of ``clips`` covers it, or two files of one level above 0 whose key ranges overlap (RocksDB would
    refuse to open it)."""
    problems = []
    low, high = group_bound(first, groups), group_bound(last + 1, groups)
    outside = [(group_bound(0, groups), low), (high, group_bound(groups, groups))]
    for f in files:
        for start, end in outside:
            if start < end and f.meets(start, end) and not any(a <= start and end <= b for a, b in clips):
                problems.append(f"SST {f.name} reaches out of key groups {first}..{last} with no range deletion "
                                "over it")
    by_level: dict[int, list[LiveFile]] = {}
    for f in files:
        if f.level > 0:
            by_level.setdefault(f.level, []).append(f)
    for level, fs in by_level.items():
        fs.sort(key=lambda f: f.smallest_key)
        for x, y in zip(fs, fs[1:]):
            if x.meets(y.smallest_key, y.smallest_key + b"\0"):
                problems.append(f"SST {x.name} and {y.name} overlap in level {level}")
    return problems


def partial_level(copies: list[LiveFile], ranges: list[tuple[bytes, bytes]], max_level: int = 6) -> int:
    """The deepest level (``max_level`` down to 1) where no copied file's key range overlaps any of
    ``ranges`` (the rewritten files' smallest and largest keys), 0 when every level has one: where the
    rewritten files go in the target's MANIFEST."""
    for level in range(max_level, 0, -1):
        if not any(c.level == level and c.meets(lo, hi + b"\0") for c in copies for lo, hi in ranges):
            return level
    return 0
